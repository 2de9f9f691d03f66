#include "attention/read_stream_op.h"

#include <algorithm>
#include <array>
#include <string>

#include "attention/buffer_checks.h"
#include "attention/kernel_choice.h"
#include "attention/kernel_constants.h"
#include "common/shader_interface.h"
#include "util/ceil_div.h"
#include "util/status_macros.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
namespace {

constexpr uint32_t kWorkgroupSize = 256;
// Workgroups per compute unit: enough loads in flight to reach the device's bandwidth.
constexpr uint32_t kWorkgroupsPerComputeUnit = 8;

}  // namespace

Result<std::unique_ptr<ReadStreamOperator>> ReadStreamOperator::Create(const vk::Device& device, const DeviceInfo& info,
                                                                       vk::PipelineStore& pipelines) {
  auto op = std::unique_ptr<ReadStreamOperator>(new ReadStreamOperator(info, pipelines));
  VKF_ASSIGN_OR_RETURN(op->layout_, vk::KernelLayout::Create(device, VKF_READ_STREAM_BINDING_COUNT,
                                                             sizeof(gpu::ReadStreamPush)));
  return op;
}

uint32_t ReadStreamOperator::Workgroups(uint64_t words) const {
  uint64_t groups = uint64_t(ComputeUnitsOrAssumed(info_)) * kWorkgroupsPerComputeUnit;
  // Enough invocations that none loops past a quarter of the driver's loop budget.
  if (info_.shader_loop_budget > 0) {
    const uint64_t words_per_invocation = 4ull * (info_.shader_loop_budget / 4);
    groups = std::max(groups, CeilDiv(words, words_per_invocation * kWorkgroupSize));
  }
  return uint32_t(std::min<uint64_t>({groups, CeilDiv(words, kWorkgroupSize), info_.max_workgroup_count[0]}));
}

uint64_t ReadStreamOperator::SinkPartBytes(uint64_t words) const {
  const uint64_t alignment = std::max<uint64_t>(info_.min_storage_buffer_offset_alignment, 16);
  return CeilDiv(16ull * Workgroups(words), alignment) * alignment;
}

uint64_t ReadStreamOperator::SinkBytes(std::span<const BufferView> sources) const {
  uint64_t bytes = 0;
  for (const BufferView& source : sources) bytes += SinkPartBytes(source.size / 16);
  return bytes;
}

Status ReadStreamOperator::Record(VkCommandBuffer cmd, std::span<const BufferView> sources, const BufferView& sink) {
  if (kWorkgroupSize > info_.max_workgroup_invocations) {
    return Status::Error(ErrorCode::kUnsupported, "the read probe needs 256 invocations per workgroup");
  }
  for (const BufferView& source : sources) {
    if (source.size % 16 != 0 || source.size / 16 > UINT32_MAX) {
      return Status::Error(ErrorCode::kInvalidArgument, "a read-probe source must be a multiple of 16 bytes, below 64 GiB");
    }
  }
  std::vector<NamedView> views = {{"sink", sink, SinkBytes(sources)}};
  for (const BufferView& source : sources) views.push_back({"source", source, source.size});
  VKF_RETURN_IF_ERROR(CheckViews(info_, views));
  VKF_RETURN_IF_ERROR(CheckNoOverlap({views[0]}, std::vector<NamedView>(views.begin() + 1, views.end())));

  const vk::ShaderBlob* shader = vk::FindShader("read_stream");
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, "the read probe is not built");
  SpecConstants spec{};
  spec[VKF_SPEC_WORKGROUP_SIZE] = kWorkgroupSize;
  VKF_ASSIGN_OR_RETURN(VkPipeline pipeline, pipelines_.Get(*shader, layout_->pipeline_layout(), spec));
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  VkDeviceSize sink_offset = 0;
  for (const BufferView& source : sources) {
    const gpu::ReadStreamPush push{uint32_t(source.size / 16)};
    const uint32_t groups = Workgroups(push.words);
    if (groups == 0) continue;  // an empty source
    // Each source its own part of the sink: the dispatches need no barrier between them.
    const BufferView sink_part{sink.buffer, sink.offset + sink_offset, 16ull * groups};
    sink_offset += SinkPartBytes(push.words);
    const std::array<BufferView, VKF_READ_STREAM_BINDING_COUNT> bindings = {source, sink_part};
    VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
    vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    vkCmdDispatch(cmd, groups, 1, 1);
  }
  return Status::Ok();
}

}  // namespace vkflash::attention
