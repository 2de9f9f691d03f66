#include "attention/loop_budget.h"

#include <cstring>

#include "common/shader_interface.h"
#include "util/status_macros.h"
#include "vulkan/barriers.h"
#include "vulkan/kernel_layout.h"
#include "vulkan/memory.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {

Result<uint32_t> ProbeLoopBudget(const vk::Device& device, vk::CommandRunner& runner, vk::PipelineStore& pipelines) {
  const vk::ShaderBlob* shader = vk::FindShader("loop_budget_probe");
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, "kernel 'loop_budget_probe' is not built");
  const uint32_t contents[5] = {0, 1, 1, 1, 1};
  VKF_ASSIGN_OR_RETURN(vk::ScopedBuffer buffer,
                       vk::ScopedBuffer::Create(device, sizeof(contents), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT));
  std::memcpy(buffer.mapped(), contents, sizeof(contents));
  const uint32_t iterations = VKF_LOOP_PROBE_ITERATIONS;
  VKF_ASSIGN_OR_RETURN(auto layout, vk::KernelLayout::Create(device, 1, sizeof(iterations)));
  VKF_ASSIGN_OR_RETURN(VkPipeline pipeline, pipelines.Get(*shader, layout->pipeline_layout(), {}));
  const BufferView view{buffer.buffer(), 0, sizeof(contents)};
  VKF_RETURN_IF_ERROR(runner.Run([&](VkCommandBuffer cmd) -> Status {
    // The host's writes are visible to the shader: vkQueueSubmit makes them so.
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    VKF_RETURN_IF_ERROR(layout->BindBuffers(cmd, std::span<const BufferView>(&view, 1)));
    vkCmdPushConstants(cmd, layout->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(iterations), &iterations);
    vkCmdDispatch(cmd, 1, 1, 1);
    vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                      VK_ACCESS_HOST_READ_BIT);
    return Status::Ok();
  }));
  uint32_t done = 0;
  std::memcpy(&done, buffer.mapped(), sizeof(done));
  return done >= iterations ? 0u : done;
}

}  // namespace vkflash::attention
