#include "vulkan/gpu_timer.h"

#include "util/status_macros.h"
#include "util/vk_check.h"
#include "vulkan/barriers.h"

namespace vkflash::vk {

Result<std::vector<double>> TimeOnGpu(const Device& device, const DeviceInfo& info, CommandRunner& runner,
                                      const std::function<Status(VkCommandBuffer)>& record, uint32_t runs) {
  if (runs == 0) return std::vector<double>();
  uint32_t family_count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device.physical(), &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vkGetPhysicalDeviceQueueFamilyProperties(device.physical(), &family_count, families.data());
  const uint32_t valid_bits = families.at(device.queue_family()).timestampValidBits;
  if (valid_bits == 0 || info.timestamp_period_ns <= 0.0f) {
    return Status::Error(ErrorCode::kUnsupported, "this device's compute queue has no timestamps");
  }

  VkQueryPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  pool_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  pool_info.queryCount = 2 * runs;
  VkQueryPool pool = VK_NULL_HANDLE;
  VKF_VK_RETURN_IF_ERROR(vkCreateQueryPool(device.handle(), &pool_info, nullptr, &pool), "vkCreateQueryPool");
  struct PoolGuard {
    VkDevice device;
    VkQueryPool pool;
    ~PoolGuard() { vkDestroyQueryPool(device, pool, nullptr); }
  } guard{device.handle(), pool};

  VKF_RETURN_IF_ERROR(runner.Run([&](VkCommandBuffer cmd) {
    vkCmdResetQueryPool(cmd, pool, 0, 2 * runs);
    FullBarrier(cmd);
    for (uint32_t i = 0; i < runs; ++i) {
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 2 * i);
      VKF_RETURN_IF_ERROR(record(cmd));
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 2 * i + 1);
      FullBarrier(cmd);
    }
    return Status::Ok();
  }));

  std::vector<uint64_t> ticks(2 * runs);
  VKF_VK_RETURN_IF_ERROR(vkGetQueryPoolResults(device.handle(), pool, 0, 2 * runs, ticks.size() * sizeof(uint64_t),
                                               ticks.data(), sizeof(uint64_t),
                                               VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                         "vkGetQueryPoolResults");
  const uint64_t mask = valid_bits >= 64 ? ~0ull : (1ull << valid_bits) - 1;
  std::vector<double> milliseconds(runs);
  for (uint32_t i = 0; i < runs; ++i) {
    const uint64_t elapsed = ((ticks[2 * i + 1] & mask) - (ticks[2 * i] & mask)) & mask;
    milliseconds[i] = double(elapsed) * info.timestamp_period_ns * 1e-6;
  }
  return milliseconds;
}

}  // namespace vkflash::vk
