#include <vkflash/diagnostics.hpp>

#include "attention/naive_op.h"

#include <algorithm>
#include <array>

#include "attention/buffer_checks.h"
#include "attention/call_layout.h"
#include "attention/kernel_constants.h"
#include "util/status_macros.h"
#include "vulkan/barriers.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {

Result<std::unique_ptr<NaiveOperator>> NaiveOperator::Create(const vk::Device& device, const DeviceInfo& info,
                                                             vk::PipelineStore& pipelines) {
  auto op = std::unique_ptr<NaiveOperator>(new NaiveOperator(info, pipelines));
  VKF_ASSIGN_OR_RETURN(op->layout_, vk::KernelLayout::Create(device, VKF_NAIVE_BINDING_COUNT, sizeof(gpu::NaivePush)));
  return op;
}

Status NaiveOperator::Record(VkCommandBuffer cmd, const AttentionParams& params, const ForwardBuffers& buffers,
                             const BufferView& scores) {
  VKF_ASSIGN_OR_RETURN(const CallLayout call, ResolveCallLayout(params, /*backward=*/false));
  if (!call.packed) {
    return Status::Error(ErrorCode::kUnsupported, "the naive baseline takes packed [B, H, N, D] tensors only");
  }
  if (params.softcap != 0.0f || params.alibi != AlibiSlopes::kNone || params.sinks || params.mask.type != MaskType::kNone) {
    return Status::Error(ErrorCode::kUnsupported, "the naive baseline has no softcap, ALiBi, sinks or mask");
  }
  const AttentionShape& shape = params.shape;
  if (shape.q_elements() == 0) return Status::Ok();
  if (shape.kv_len == 0) {
    return Status::Error(ErrorCode::kUnsupported, "the naive baseline needs at least one key");
  }
  // Its softmax pass walks a row three times in one invocation: 3 * kv_len loop iterations.
  if (info_.shader_loop_budget > 0 && 3 * uint64_t(shape.kv_len) + 64 > info_.shader_loop_budget / 2) {
    return Status::Error(ErrorCode::kUnsupported, "the naive baseline walks 3 * kv_len loop iterations per row; this "
                                                  "driver ends shader loops after " +
                                                      std::to_string(info_.shader_loop_budget));
  }
  if (params.dtype == DataType::kFloat16 && !info_.storage_buffer_16bit) {
    return Status::Error(ErrorCode::kUnsupported, "float16 tensors need storageBuffer16BitAccess");
  }
  const uint64_t element = DataTypeSize(params.dtype);
  const NamedView q{"q", buffers.q, shape.q_elements() * element}, o{"o", buffers.o, shape.q_elements() * element};
  const NamedView k{"k", buffers.k, shape.kv_elements() * element}, v{"v", buffers.v, shape.kv_elements() * element};
  const NamedView s{"scores", scores, NaiveScoresBytes(shape)};
  VKF_RETURN_IF_ERROR(CheckViews(info_, {q, k, v, o, s}));
  VKF_RETURN_IF_ERROR(CheckNoOverlap({o, s}, {q, k, v}));
  const uint32_t q_groups = (shape.q_len + 15) / 16, kv_groups = (shape.kv_len + 15) / 16;
  const uint32_t d_groups = (shape.head_dim + 15) / 16, row_groups = (shape.q_len + 255) / 256;
  if (std::max({q_groups, kv_groups, row_groups}) > info_.max_workgroup_count[0] || q_groups > info_.max_workgroup_count[1]) {
    return Status::Error(ErrorCode::kUnsupported, "lengths exceed maxComputeWorkGroupCount");
  }

  const vk::ShaderBlob* shader =
      vk::FindShader(params.dtype == DataType::kFloat16 ? "naive_f16" : "naive_f32");
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, "the naive kernel is not built");
  std::array<VkPipeline, 3> passes{};
  for (uint32_t pass = 0; pass < 3; ++pass) {
    SpecConstants spec = MakeSpecConstants(KernelChoice{}, params, /*write_lse=*/false);
    spec[VKF_SPEC_WORKGROUP_SIZE] = spec[VKF_SPEC_HEAD_DIM] = 0;  // not used by this kernel
    spec[VKF_SPEC_NAIVE_PASS] = pass;
    VKF_ASSIGN_OR_RETURN(passes[pass], pipelines_.Get(*shader, layout_->pipeline_layout(), spec));
  }

  const std::array<BufferView, VKF_NAIVE_BINDING_COUNT> bindings = {q.view, k.view, v.view, o.view, scores};
  gpu::NaivePush push{};
  const gpu::AttentionPush attention = MakeAttentionPush(call);
  push.q_heads = attention.q_heads;
  push.kv_heads = attention.kv_heads;
  push.q_len = attention.q_len;
  push.kv_len = attention.kv_len;
  push.scale_log2 = attention.scale_log2;
  push.window_left = attention.window_left;
  push.window_right = attention.window_right;
  push.head_dim = shape.head_dim;
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, passes[0]);
  VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
  const uint32_t slices = shape.batch * shape.q_heads;
  for (push.slice = 0; push.slice < slices; ++push.slice) {
    vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    const std::array<std::array<uint32_t, 2>, 3> grid = {{{kv_groups, q_groups}, {row_groups, 1}, {d_groups, q_groups}}};
    for (uint32_t pass = 0; pass < 3; ++pass) {
      vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, passes[pass]);
      vkCmdDispatch(cmd, grid[pass][0], grid[pass][1], 1);
      // Each pass reads what the last wrote; the next slice rewrites the scores the last one read.
      vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    }
  }
  return Status::Ok();
}

}  // namespace vkflash::attention
