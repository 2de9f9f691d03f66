#include "attention/backward_op.h"

#include <array>

#include "attention/buffer_checks.h"
#include "attention/kernel_constants.h"
#include "attention/tile_config.h"
#include "util/status_macros.h"
#include "vulkan/barriers.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
Result<std::unique_ptr<BackwardOperator>> BackwardOperator::Create(const vk::Device& device, const DeviceInfo& info,
                                                                   const CoopmatLayout& layout,
                                                                   vk::PipelineStore& pipelines) {
  auto op = std::unique_ptr<BackwardOperator>(new BackwardOperator(info, layout, pipelines));
  VKF_ASSIGN_OR_RETURN(op->layout_, vk::KernelLayout::Create(device, VKF_BWD_BINDING_COUNT, sizeof(gpu::AttentionPush)));
  return op;
}

Result<VkPipeline> BackwardOperator::Pipeline(const KernelChoice& choice, const AttentionParams& params) {
  const vk::ShaderBlob* shader = vk::FindShader(choice.kernel);
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, "kernel '" + choice.kernel + "' is not built");
  SpecConstants spec = MakeSpecConstants(choice, params, /*write_lse=*/false);
  SetCoopmatConstants(choice, coopmat_layout_, &spec);
  return pipelines_.Get(*shader, layout_->pipeline_layout(), spec);
}

Status BackwardOperator::Record(VkCommandBuffer cmd, const AttentionParams& params, const BackwardBuffers& buffers) {
  VKF_RETURN_IF_ERROR(ValidateAttentionParams(params));
  const AttentionShape& shape = params.shape;
  const bool has_queries = shape.q_elements() > 0, has_keys = shape.kv_elements() > 0;
  if (!has_queries && !has_keys) return Status::Ok();

  const uint64_t element = DataTypeSize(params.dtype);
  const uint64_t q_bytes = shape.q_elements() * element, kv_bytes = shape.kv_elements() * element;
  const uint64_t row_bytes = shape.lse_elements() * sizeof(float);
  NamedView q{"q", buffers.q, q_bytes}, o{"o", buffers.o, q_bytes}, d_o{"d_o", buffers.d_o, q_bytes},
      dq{"dq", buffers.dq, q_bytes}, lse{"lse", buffers.lse, row_bytes}, workspace{"workspace", buffers.workspace, row_bytes};
  NamedView k{"k", buffers.k, kv_bytes}, v{"v", buffers.v, kv_bytes}, dk{"dk", buffers.dk, kv_bytes},
      dv{"dv", buffers.dv, kv_bytes};
  // Empty tensors cannot be bound: a non-empty one stands in (the kernels never touch it).
  if (has_queries) {
    VKF_RETURN_IF_ERROR(CheckViews(info_, {q, o, d_o, dq, lse, workspace}));
  }
  if (has_keys) {
    VKF_RETURN_IF_ERROR(CheckViews(info_, {k, v, dk, dv}));
  }
  std::vector<NamedView> outputs, inputs;
  if (has_queries) {
    outputs.insert(outputs.end(), {dq, workspace});
    inputs.insert(inputs.end(), {q, o, lse, d_o});
  }
  if (has_keys) {
    outputs.insert(outputs.end(), {dk, dv});
    inputs.insert(inputs.end(), {k, v});
  }
  VKF_RETURN_IF_ERROR(CheckNoOverlap(outputs, inputs));
  if (!has_queries) q.view = o.view = d_o.view = dq.view = lse.view = workspace.view = buffers.k;
  if (!has_keys) k.view = v.view = dk.view = dv.view = buffers.q;

  const bool aligned = VectorAligned({q.view, k.view, v.view, d_o.view, dq.view, dk.view, dv.view});
  VKF_ASSIGN_OR_RETURN(const BackwardKernelChoice choice, ChooseBackwardKernels(info_, params, /*scalar_only=*/!aligned));
  KernelChoice preprocess;
  preprocess.kernel = std::string("backward_preprocess_") + (params.dtype == DataType::kFloat16 ? "f16" : "f32");
  preprocess.workgroup_size = PreprocessWorkgroupSize(info_);
  const uint32_t groups_dq = (shape.q_len + choice.dq.block_q - 1) / choice.dq.block_q;
  const uint32_t groups_dkdv = (shape.kv_len + choice.dkdv.block_kv - 1) / choice.dkdv.block_kv;
  const uint32_t rows_per_group = preprocess.workgroup_size / VKF_PREPROCESS_THREADS_PER_ROW;
  const uint32_t groups_rows = (shape.q_len + rows_per_group - 1) / rows_per_group;
  if (groups_dq > info_.max_workgroup_count[0] || groups_dkdv > info_.max_workgroup_count[0] ||
      shape.q_heads > info_.max_workgroup_count[1] || shape.batch > info_.max_workgroup_count[2]) {
    return Status::Error(ErrorCode::kUnsupported, "lengths / heads / batch exceed maxComputeWorkGroupCount");
  }
  VKF_ASSIGN_OR_RETURN(VkPipeline preprocess_pipeline, Pipeline(preprocess, params));
  VKF_ASSIGN_OR_RETURN(VkPipeline dkdv_pipeline, Pipeline(choice.dkdv, params));
  VKF_ASSIGN_OR_RETURN(VkPipeline dq_pipeline, Pipeline(choice.dq, params));

  std::array<BufferView, VKF_BWD_BINDING_COUNT> bindings;
  bindings[VKF_BWD_BINDING_Q] = q.view;
  bindings[VKF_BWD_BINDING_K] = k.view;
  bindings[VKF_BWD_BINDING_V] = v.view;
  bindings[VKF_BWD_BINDING_O] = o.view;
  bindings[VKF_BWD_BINDING_LSE] = lse.view;
  bindings[VKF_BWD_BINDING_DO] = d_o.view;
  bindings[VKF_BWD_BINDING_DELTA] = workspace.view;
  bindings[VKF_BWD_BINDING_DQ] = dq.view;
  bindings[VKF_BWD_BINDING_DK] = dk.view;
  bindings[VKF_BWD_BINDING_DV] = dv.view;
  const gpu::AttentionPush push = MakeAttentionPush(params);

  // Descriptors and push constants stay bound across the three pipelines (one layout).
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, preprocess_pipeline);
  VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
  vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
  if (has_queries) {
    vkCmdDispatch(cmd, groups_rows, shape.q_heads, shape.batch);
    // delta is written by the preprocess and read by both gradient kernels.
    vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
  }
  if (has_keys) {  // with no queries this writes zero dK, dV
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dkdv_pipeline);
    vkCmdDispatch(cmd, groups_dkdv, shape.kv_heads, shape.batch);
  }
  if (has_queries) {  // with no keys this writes zero dQ
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dq_pipeline);
    vkCmdDispatch(cmd, groups_dq, shape.q_heads, shape.batch);
  }
  return Status::Ok();
}

}  // namespace vkflash::attention
