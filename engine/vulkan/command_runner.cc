#include "vulkan/command_runner.h"

#include "util/status_macros.h"
#include "util/vk_check.h"

namespace vkflash::vk {

Result<std::unique_ptr<CommandRunner>> CommandRunner::Create(const Device& device) {
  auto runner = std::unique_ptr<CommandRunner>(new CommandRunner(device));
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = device.queue_family();
  VKF_VK_RETURN_IF_ERROR(vkCreateCommandPool(device.handle(), &pool_info, nullptr, &runner->pool_),
                         "vkCreateCommandPool");
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = runner->pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VKF_VK_RETURN_IF_ERROR(vkAllocateCommandBuffers(device.handle(), &alloc, &runner->command_buffer_),
                         "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VKF_VK_RETURN_IF_ERROR(vkCreateFence(device.handle(), &fence_info, nullptr, &runner->fence_), "vkCreateFence");
  return runner;
}

CommandRunner::~CommandRunner() {
  if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_.handle(), fence_, nullptr);
  if (pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_.handle(), pool_, nullptr);  // frees the buffer
}

Status CommandRunner::Run(const std::function<Status(VkCommandBuffer)>& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  VKF_VK_RETURN_IF_ERROR(vkResetCommandBuffer(command_buffer_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VKF_VK_RETURN_IF_ERROR(vkBeginCommandBuffer(command_buffer_, &begin), "vkBeginCommandBuffer");
  const Status recorded = record(command_buffer_);
  VKF_VK_RETURN_IF_ERROR(vkEndCommandBuffer(command_buffer_), "vkEndCommandBuffer");
  VKF_RETURN_IF_ERROR(recorded);

  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &command_buffer_;
  VKF_VK_RETURN_IF_ERROR(vkResetFences(device_.handle(), 1, &fence_), "vkResetFences");
  VKF_VK_RETURN_IF_ERROR(vkQueueSubmit(device_.queue(), 1, &submit, fence_), "vkQueueSubmit");
  VKF_VK_RETURN_IF_ERROR(vkWaitForFences(device_.handle(), 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  return Status::Ok();
}

}  // namespace vkflash::vk
