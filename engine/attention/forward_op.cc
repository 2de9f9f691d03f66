#include <vkflash/diagnostics.hpp>

#include "attention/forward_op.h"

#include <algorithm>
#include <array>

#include "attention/buffer_checks.h"
#include "attention/kernel_constants.h"
#include "attention/backends/decode_backend.h"
#include "attention/backends/kernel_backend.h"
#include "attention/backends/scalar_backend.h"
#include "attention/chunk_plan.h"
#include "attention/kernel_choice.h"
#include "attention/workspace_layout.h"
#include "util/status_macros.h"
#include "vulkan/barriers.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
namespace {

// The workspace parts bound to VKF_FWD_BINDING_O_STATE and _ROW_STATE: a chunked forward's state
// between dispatches, or a split decode call's parts.
struct StateParts {
  VkDeviceSize o_offset = 0, o_bytes = 0, row_offset = 0, row_bytes = 0, total = 0;
};
StateParts MakeStateParts(const DeviceInfo& device, VkDeviceSize o_bytes, VkDeviceSize row_bytes) {
  WorkspaceLayout layout(device);
  StateParts parts;
  parts.o_bytes = o_bytes;
  parts.o_offset = layout.Add(o_bytes);
  parts.row_bytes = row_bytes;
  parts.row_offset = layout.Add(row_bytes);
  parts.total = layout.bytes();
  return parts;
}

// A chunked forward: O so far in vec4 rows; per row the max and each lane's sum.
StateParts ForwardStateParts(const DeviceInfo& device, const AttentionShape& shape, const KernelChoice& choice) {
  return MakeStateParts(device, shape.lse_elements() * ((shape.head_dim + 3) / 4) * 16,
                        shape.lse_elements() * (choice.threads_per_row + 1) * sizeof(float));
}

bool IsDecode(const KernelChoice& choice) { return choice.family == "decode"; }

// A split decode call: each part's normalized O and LSE.
StateParts DecodeStateParts(const DeviceInfo& device, const AttentionShape& shape, uint32_t splits) {
  return MakeStateParts(device, DecodePartialOBytes(shape, splits), DecodePartialLseBytes(shape, splits));
}

}  // namespace

Result<std::unique_ptr<ForwardOperator>> ForwardOperator::Create(const vk::Device& device, const DeviceInfo& info,
                                                                 const TileOverrides& overrides, const CoopmatLayout& layout,
                                                                 vk::PipelineStore& pipelines) {
  auto op = std::unique_ptr<ForwardOperator>(new ForwardOperator(info, overrides, layout, pipelines));
  VKF_ASSIGN_OR_RETURN(op->layout_, vk::KernelLayout::Create(device, VKF_FWD_BINDING_COUNT, sizeof(gpu::AttentionPush)));
  return op;
}

Result<ChunkPlan> ForwardOperator::Chunks(const KernelChoice& choice, const AttentionParams& params,
                                          bool instrumented) const {
  // No budget on devices that run tensor cores; the decode kernels keep within it by their parts.
  if (choice.cooperative_matrix != CooperativeMatrixApi::kNone || IsDecode(choice)) return ChunkPlan{};
  const uint64_t tiles = (uint64_t(params.shape.kv_len) + choice.block_kv - 1) / choice.block_kv;
  return PlanChunks(info_, ScalarForwardLoopCost(choice, params.shape.head_dim, instrumented), tiles, choice.block_kv);
}

Result<uint64_t> ForwardOperator::WorkspaceBytes(const AttentionParams& params, bool with_stats) const {
  VKF_RETURN_IF_ERROR(ValidateAttentionParams(params));
  VKF_ASSIGN_OR_RETURN(const KernelChoice choice, ChooseForwardKernel(info_, params, with_stats, overrides_));
  if (IsDecode(choice)) {
    VKF_ASSIGN_OR_RETURN(const DecodeSplits split, PlanDecodeSplits(info_, params, choice, overrides_));
    return split.splits > 1 ? DecodeStateParts(info_, params.shape, split.splits).total : 0;
  }
  VKF_ASSIGN_OR_RETURN(const ChunkPlan plan, Chunks(choice, params, with_stats));
  return plan.chunks > 1 ? ForwardStateParts(info_, params.shape, choice).total : 0;
}

Status ForwardOperator::Record(VkCommandBuffer cmd, const AttentionParams& params, const ForwardBuffers& buffers,
                               const BufferView& stats_view) {
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
  const bool instrumented = !stats_view.empty();
  const bool aligned = VectorAligned({buffers.q, buffers.k, buffers.v, buffers.o});
  VKF_ASSIGN_OR_RETURN(const KernelChoice choice, ChooseForwardKernel(info_, params, /*scalar_only=*/instrumented || !aligned, overrides_));
  const NamedView stats{"stats", stats_view, ForwardStatsBytes(params.shape, choice)};
  if (instrumented) VKF_RETURN_IF_ERROR(CheckViews(info_, {stats}));

  // With kv_len == 0 no key tile is visited: K and V are never read, and every row gets O = 0,
  // LSE = -inf. A zero-sized range cannot be bound, so Q stands in for them.
  NamedView k{"k", buffers.k, shape.kv_elements() * element};
  NamedView v{"v", buffers.v, shape.kv_elements() * element};
  if (shape.kv_elements() == 0) {
    k.view = v.view = buffers.q;
  } else {
    VKF_RETURN_IF_ERROR(CheckViews(info_, {k, v}));
  }

  if (IsDecode(choice)) return RecordDecode(cmd, params, choice, buffers, {q.view, k.view, v.view, o.view});

  // On a driver with a loop budget, long key loops run in chunks that keep their state in the
  // workspace (common/shader_interface.h, AttentionPush.chunk_*).
  VKF_ASSIGN_OR_RETURN(const ChunkPlan plan, Chunks(choice, params, instrumented));
  const StateParts state = ForwardStateParts(info_, shape, choice);
  const NamedView workspace{"workspace", buffers.workspace, plan.chunks > 1 ? state.total : 0,
                            std::max(state.o_bytes, state.row_bytes)};
  std::vector<NamedView> outputs = {o};
  if (!buffers.lse.empty()) outputs.push_back(lse);
  if (instrumented) outputs.push_back(stats);
  if (plan.chunks > 1) {
    if (buffers.workspace.empty()) {
      return Status::Error(ErrorCode::kInvalidArgument,
                           "this call needs a workspace of " + std::to_string(state.total) +
                               " bytes (Context::ForwardWorkspaceBytes): this driver ends long shader loops early, so "
                               "the keys are walked in " + std::to_string(plan.chunks) + " chunks");
    }
    VKF_RETURN_IF_ERROR(CheckViews(info_, {workspace}));
    outputs.push_back(workspace);
  }
  VKF_RETURN_IF_ERROR(CheckNoOverlap(outputs, {q, k, v}));

  const uint32_t group_count_x = (shape.q_len + choice.block_q - 1) / choice.block_q;
  if (group_count_x > info_.max_workgroup_count[0] || shape.q_heads > info_.max_workgroup_count[1] ||
      shape.batch > info_.max_workgroup_count[2]) {
    return Status::Error(ErrorCode::kUnsupported, "q_len / q_heads / batch exceed maxComputeWorkGroupCount");
  }

  VKF_ASSIGN_OR_RETURN(VkPipeline pipeline,
                       Pipeline(choice, params, /*write_lse=*/!buffers.lse.empty(), instrumented, plan.chunks > 1));

  // Unused bindings still need a valid buffer: O stands in (never touched then).
  std::array<BufferView, VKF_FWD_BINDING_COUNT> bindings;
  bindings.fill(o.view);
  bindings[VKF_FWD_BINDING_Q] = q.view;
  bindings[VKF_FWD_BINDING_K] = k.view;
  bindings[VKF_FWD_BINDING_V] = v.view;
  if (!buffers.lse.empty()) bindings[VKF_FWD_BINDING_LSE] = buffers.lse;
  if (instrumented) bindings[VKF_FWD_BINDING_STATS] = stats_view;
  if (plan.chunks > 1) {
    bindings[VKF_FWD_BINDING_O_STATE] = WorkspacePart(buffers.workspace, state.o_offset, state.o_bytes);
    bindings[VKF_FWD_BINDING_ROW_STATE] = WorkspacePart(buffers.workspace, state.row_offset, state.row_bytes);
  }
  gpu::AttentionPush push = MakeAttentionPush(params);

  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
  for (uint32_t chunk = 0; chunk < plan.chunks; ++chunk) {
    if (plan.chunks > 1) {
      push.chunk_begin = chunk * plan.length;
      push.chunk_end = chunk + 1 == plan.chunks ? shape.kv_len : (chunk + 1) * plan.length;
      // Each workgroup reads back the state it wrote in the last chunk.
      if (chunk > 0) {
        vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      }
    }
    vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    vkCmdDispatch(cmd, group_count_x, shape.q_heads, shape.batch);
  }
  return Status::Ok();
}

Result<VkPipeline> ForwardOperator::Pipeline(const KernelChoice& kernel, const AttentionParams& params,
                                            bool write_lse, bool instrument, bool chunked) {
  const vk::ShaderBlob* shader = vk::FindShader(kernel.kernel);
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, "kernel '" + kernel.kernel + "' is not built");
  SpecConstants spec = MakeSpecConstants(kernel, params, write_lse, instrument, chunked);
  if (!kernel.family.empty()) {  // the decode merge is no family's choice
    VKF_ASSIGN_OR_RETURN(const KernelBackend* family, BackendOf(kernel));
    family->SetSpecConstants(kernel, coopmat_layout_, &spec);
  }
  return pipelines_.Get(*shader, layout_->pipeline_layout(), spec);
}

Status ForwardOperator::RecordDecode(VkCommandBuffer cmd, const AttentionParams& params, const KernelChoice& choice,
                                     const ForwardBuffers& buffers, const std::array<BufferView, 4>& qkvo) {
  const AttentionShape& shape = params.shape;
  const auto& [q, k, v, o] = qkvo;
  VKF_ASSIGN_OR_RETURN(DecodeSplits split, PlanDecodeSplits(info_, params, choice, overrides_));
  if (split.splits > 1 && buffers.workspace.empty()) {  // one part, where the loop budget allows
    TileOverrides one_part = overrides_;
    one_part.decode_splits = 1;
    VKF_ASSIGN_OR_RETURN(split, PlanDecodeSplits(info_, params, choice, one_part));
  }
  const bool parts = split.splits > 1;
  const StateParts state = DecodeStateParts(info_, shape, split.splits);
  const uint64_t element = DataTypeSize(params.dtype);
  std::vector<NamedView> outputs = {{"o", o, shape.q_elements() * element}};
  if (!buffers.lse.empty()) outputs.push_back({"lse", buffers.lse, shape.lse_elements() * sizeof(float)});
  if (parts) {
    if (buffers.workspace.empty()) {
      return Status::Error(ErrorCode::kInvalidArgument,
                           "this call needs a workspace of " + std::to_string(state.total) +
                               " bytes (Context::ForwardWorkspaceBytes): this driver ends long shader loops early, "
                               "so the keys are split over " + std::to_string(split.splits) + " workgroups per KV head");
    }
    const NamedView workspace{"workspace", buffers.workspace, state.total, std::max(state.o_bytes, state.row_bytes)};
    VKF_RETURN_IF_ERROR(CheckViews(info_, {workspace}));
    outputs.push_back(workspace);
  }
  VKF_RETURN_IF_ERROR(CheckNoOverlap(outputs, {{"q", q, shape.q_elements() * element},
                                               {"k", k, shape.kv_elements() * element},
                                               {"v", v, shape.kv_elements() * element}}));
  if (split.splits > info_.max_workgroup_count[0] || shape.kv_heads > info_.max_workgroup_count[1] ||
      shape.batch > info_.max_workgroup_count[2] || shape.q_len > info_.max_workgroup_count[0] ||
      shape.q_heads > info_.max_workgroup_count[1]) {
    return Status::Error(ErrorCode::kUnsupported, "splits / heads / batch exceed maxComputeWorkGroupCount");
  }

  const bool write_lse = !buffers.lse.empty();
  KernelChoice combine;
  combine.kernel = "decode_combine_f16";
  combine.workgroup_size = kCombineWorkgroupSize;
  VKF_ASSIGN_OR_RETURN(VkPipeline decode_pipeline, Pipeline(choice, params, write_lse, /*instrument=*/false, parts));
  VkPipeline combine_pipeline = VK_NULL_HANDLE;
  if (parts) {
    VKF_ASSIGN_OR_RETURN(combine_pipeline, Pipeline(combine, params, write_lse, /*instrument=*/false, false));
  }

  // Unused bindings still need a valid buffer: O stands in (never touched then).
  std::array<BufferView, VKF_FWD_BINDING_COUNT> bindings;
  bindings.fill(o);
  bindings[VKF_FWD_BINDING_Q] = q;
  bindings[VKF_FWD_BINDING_K] = k;
  bindings[VKF_FWD_BINDING_V] = v;
  if (write_lse) bindings[VKF_FWD_BINDING_LSE] = buffers.lse;
  if (parts) {
    bindings[VKF_FWD_BINDING_O_STATE] = WorkspacePart(buffers.workspace, state.o_offset, state.o_bytes);
    bindings[VKF_FWD_BINDING_ROW_STATE] = WorkspacePart(buffers.workspace, state.row_offset, state.row_bytes);
  }
  gpu::AttentionPush push = MakeAttentionPush(params);
  push.split_keys = split.split_keys;

  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, decode_pipeline);
  VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
  vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
  vkCmdDispatch(cmd, split.splits, shape.kv_heads, shape.batch);
  if (parts) {
    // The merge reads every part the first pass wrote.
    vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, combine_pipeline);
    vkCmdDispatch(cmd, shape.q_len, shape.q_heads, shape.batch);
  }
  return Status::Ok();
}

}  // namespace vkflash::attention
