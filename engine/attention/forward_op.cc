#include "attention/forward_op.h"

#include <array>

#include "attention/buffer_checks.h"
#include "attention/kernel_constants.h"
#include "attention/tile_config.h"
#include "util/status_macros.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {

Result<std::unique_ptr<ForwardOperator>> ForwardOperator::Create(const vk::Device& device, const DeviceInfo& info,
                                                                 const CoopmatLayout& layout,
                                                                 vk::PipelineStore& pipelines) {
  auto op = std::unique_ptr<ForwardOperator>(new ForwardOperator(info, layout, pipelines));
  VKF_ASSIGN_OR_RETURN(op->layout_, vk::KernelLayout::Create(device, VKF_FWD_BINDING_COUNT, sizeof(gpu::AttentionPush)));
  return op;
}

Status ForwardOperator::Record(VkCommandBuffer cmd, const AttentionParams& params, const ForwardBuffers& buffers) {
  VKF_RETURN_IF_ERROR(ValidateAttentionParams(params));
  const AttentionShape& shape = params.shape;
  if (shape.q_elements() == 0) return Status::Ok();  // nothing to compute (batch or q_len is 0)

  const uint64_t element = DataTypeSize(params.dtype);
  const NamedView q{"q", buffers.q, shape.q_elements() * element};
  const NamedView o{"o", buffers.o, shape.q_elements() * element};
  const NamedView lse{"lse", buffers.lse, shape.lse_elements() * sizeof(float)};
  VKF_RETURN_IF_ERROR(CheckViews(info_, {q, o}));
  if (!buffers.lse.empty()) VKF_RETURN_IF_ERROR(CheckViews(info_, {lse}));
  // Instrumented calls and views the tensor-core kernel cannot vector-load run the scalar kernel.
  const bool aligned = VectorAligned({buffers.q, buffers.k, buffers.v, buffers.o});
  VKF_ASSIGN_OR_RETURN(const KernelChoice choice,
                       ChooseForwardKernel(info_, params, /*scalar_only=*/!buffers.stats.empty() || !aligned));
  const NamedView stats{"stats", buffers.stats, ForwardStatsBytes(params.shape, choice)};
  if (!buffers.stats.empty()) VKF_RETURN_IF_ERROR(CheckViews(info_, {stats}));

  // With kv_len == 0 no key tile is visited: K and V are never read, and every row gets O = 0,
  // LSE = -inf. A zero-sized range cannot be bound, so Q stands in for them.
  NamedView k{"k", buffers.k, shape.kv_elements() * element};
  NamedView v{"v", buffers.v, shape.kv_elements() * element};
  if (shape.kv_elements() == 0) {
    k.view = v.view = buffers.q;
  } else {
    VKF_RETURN_IF_ERROR(CheckViews(info_, {k, v}));
  }
  std::vector<NamedView> outputs = {o};
  if (!buffers.lse.empty()) outputs.push_back(lse);
  if (!buffers.stats.empty()) outputs.push_back(stats);
  VKF_RETURN_IF_ERROR(CheckNoOverlap(outputs, {q, k, v}));

  const uint32_t group_count_x = (shape.q_len + choice.block_q - 1) / choice.block_q;
  if (group_count_x > info_.max_workgroup_count[0] || shape.q_heads > info_.max_workgroup_count[1] ||
      shape.batch > info_.max_workgroup_count[2]) {
    return Status::Error(ErrorCode::kUnsupported, "q_len / q_heads / batch exceed maxComputeWorkGroupCount");
  }

  const vk::ShaderBlob* shader = vk::FindShader(choice.kernel);
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, "kernel '" + choice.kernel + "' is not built");
  SpecConstants spec =
      MakeSpecConstants(choice, params, /*write_lse=*/!buffers.lse.empty(), /*instrument=*/!buffers.stats.empty());
  SetCoopmatConstants(choice, coopmat_layout_, &spec);
  VKF_ASSIGN_OR_RETURN(VkPipeline pipeline, pipelines_.Get(*shader, layout_->pipeline_layout(), spec));

  // Unused LSE / stats bindings still need a valid buffer: O stands in (never touched then).
  const std::array<BufferView, VKF_FWD_BINDING_COUNT> bindings = {
      q.view, k.view, v.view, o.view, buffers.lse.empty() ? o.view : buffers.lse,
      buffers.stats.empty() ? o.view : buffers.stats};
  const gpu::AttentionPush push = MakeAttentionPush(params);

  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
  vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
  vkCmdDispatch(cmd, group_count_x, shape.q_heads, shape.batch);
  return Status::Ok();
}

}  // namespace vkflash::attention
