#include <vkflash/diagnostics.hpp>

#include "attention/forward_op.h"

#include <algorithm>
#include <array>

#include "attention/buffer_checks.h"
#include "attention/call_layout.h"
#include "attention/kernel_constants.h"
#include "attention/backends/decode_backend.h"
#include "attention/backends/kernel_backend.h"
#include "attention/backends/scalar_backend.h"
#include "attention/chunk_plan.h"
#include "attention/kernel_choice.h"
#include "attention/mask_tiles_op.h"
#include "attention/workspace_layout.h"
#include "util/status_macros.h"
#include "vulkan/barriers.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
namespace {

// The workspace's parts: the sequence table (VKF_FWD_BINDING_SEQUENCES) where the call has
// sequences, the mask's block summary (VKF_FWD_BINDING_MASK_TILES) where it has a mask, then those
// bound to VKF_FWD_BINDING_O_STATE and _ROW_STATE: a chunked forward's state between dispatches,
// or a split decode call's parts (o_bytes = row_bytes = 0: none).
struct StateParts {
  VkDeviceSize table_offset = 0, table_bytes = 0;
  VkDeviceSize mask_tiles_offset = 0, mask_tiles_bytes = 0;
  VkDeviceSize o_offset = 0, o_bytes = 0, row_offset = 0, row_bytes = 0, total = 0;

  VkDeviceSize largest() const { return std::max({table_bytes, mask_tiles_bytes, o_bytes, row_bytes}); }
};
StateParts MakeStateParts(const DeviceInfo& device, const CallLayout& call, VkDeviceSize o_bytes, VkDeviceSize row_bytes) {
  WorkspaceLayout layout(device);
  StateParts parts;
  parts.table_bytes = call.sequence_table_bytes();
  if (parts.table_bytes > 0) parts.table_offset = layout.Add(parts.table_bytes);
  parts.mask_tiles_bytes = MaskTilesOperator::SummaryBytes(call);
  if (parts.mask_tiles_bytes > 0) parts.mask_tiles_offset = layout.Add(parts.mask_tiles_bytes);
  if (o_bytes > 0) {
    parts.o_bytes = o_bytes;
    parts.o_offset = layout.Add(o_bytes);
    parts.row_bytes = row_bytes;
    parts.row_offset = layout.Add(row_bytes);
  }
  parts.total = layout.bytes();
  return parts;
}

// A chunked forward: O so far in vec4 rows; per row the max, each lane's sum and (the register-tiled
// kernel's compensated sums) each lane's correction (VKF_FWD_ROW_STATE_FLOATS; rows of the planning
// shape: [B, Hq, the longest q_len]).
StateParts ForwardStateParts(const DeviceInfo& device, const CallLayout& call, const KernelChoice& choice,
                             bool chunked) {
  const AttentionShape& shape = call.planning.shape;
  if (!chunked) return MakeStateParts(device, call, 0, 0);
  return MakeStateParts(device, call, shape.lse_elements() * ((shape.head_dim + 3) / 4) * 16,
                        shape.lse_elements() * VKF_FWD_ROW_STATE_FLOATS(choice.threads_per_row) * sizeof(float));
}

bool IsDecode(const KernelChoice& choice) { return choice.family == "decode"; }

// A split decode call: each part's normalized O and LSE.
StateParts DecodeStateParts(const DeviceInfo& device, const CallLayout& call, uint32_t splits) {
  if (splits <= 1) return MakeStateParts(device, call, 0, 0);
  return MakeStateParts(device, call, DecodePartialOBytes(call.planning.shape, splits),
                        DecodePartialLseBytes(call.planning.shape, splits));
}

Status NeedsWorkspace(VkDeviceSize bytes, const std::string& why) {
  return Status::Error(ErrorCode::kInvalidArgument, "this call needs a workspace of " + std::to_string(bytes) +
                                                        " bytes (Context::ForwardWorkspaceBytes): " + why);
}

}  // namespace

Result<std::unique_ptr<ForwardOperator>> ForwardOperator::Create(const vk::Device& device, const DeviceInfo& info,
                                                                 const TileOverrides& overrides, const CoopmatLayout& layout,
                                                                 vk::PipelineStore& pipelines) {
  auto op = std::unique_ptr<ForwardOperator>(new ForwardOperator(info, overrides, layout, pipelines));
  VKF_ASSIGN_OR_RETURN(op->layout_, vk::KernelLayout::Create(device, VKF_FWD_BINDING_COUNT, sizeof(gpu::AttentionPush)));
  VKF_ASSIGN_OR_RETURN(op->mask_tiles_, MaskTilesOperator::Create(device, info, pipelines));
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
  VKF_ASSIGN_OR_RETURN(const CallLayout call, ResolveCallLayout(params, /*backward=*/false));
  VKF_ASSIGN_OR_RETURN(const KernelChoice choice,
                       ChooseForwardKernel(info_, call.planning, with_stats || !call.vector_strides, overrides_));
  if (IsDecode(choice)) {
    VKF_ASSIGN_OR_RETURN(const DecodeSplits split, PlanDecodeSplits(info_, call.planning, choice, overrides_));
    return DecodeStateParts(info_, call, split.splits).total;
  }
  VKF_ASSIGN_OR_RETURN(const ChunkPlan plan, Chunks(choice, call.planning, with_stats));
  uint64_t bytes = ForwardStateParts(info_, call, choice, plan.chunks > 1).total;
  if (IsTiledForward(choice)) {  // views that turn out unaligned run the per-row kernel
    VKF_ASSIGN_OR_RETURN(const KernelChoice per_row, ChoosePerRowForward(info_, call.planning, overrides_));
    VKF_ASSIGN_OR_RETURN(const ChunkPlan per_row_plan, Chunks(per_row, call.planning, with_stats));
    bytes = std::max<uint64_t>(bytes, ForwardStateParts(info_, call, per_row, per_row_plan.chunks > 1).total);
  }
  return bytes;
}

Result<KernelChoice> ForwardOperator::Choose(const AttentionParams& params) const {
  VKF_ASSIGN_OR_RETURN(const CallLayout call, ResolveCallLayout(params, /*backward=*/false));
  return ChooseForwardKernel(info_, call.planning, /*scalar_only=*/!call.vector_strides, overrides_);
}

Status ForwardOperator::Record(VkCommandBuffer cmd, const AttentionParams& params, const ForwardBuffers& buffers,
                               const BufferView& stats_view) {
  VKF_ASSIGN_OR_RETURN(const CallLayout call, ResolveCallLayout(params, /*backward=*/false));
  VKF_RETURN_IF_ERROR(CheckNoStrayScoreModViews(params, buffers.alibi_slopes, buffers.sinks, buffers.mask));
  const AttentionShape& shape = call.planning.shape;  // lengths: the longest sequence's
  if (shape.q_elements() == 0) return Status::Ok();   // nothing to compute (no batch or no query rows)

  const bool instrumented = !stats_view.empty();
  if (instrumented && !call.packed) {
    return Status::Error(ErrorCode::kUnsupported, "the instrumented forward takes packed [B, H, N, D] tensors only");
  }
  const NamedView q{"q", buffers.q, call.required_bytes[VKF_TENSOR_Q]};
  const NamedView o{"o", buffers.o, call.required_bytes[VKF_TENSOR_O]};
  const NamedView lse{"lse", buffers.lse, call.required_bytes[VKF_TENSOR_LSE]};
  VKF_RETURN_IF_ERROR(CheckViews(info_, {q, o}));
  if (!buffers.lse.empty()) VKF_RETURN_IF_ERROR(CheckViews(info_, {lse}));
  // Instrumented calls and views or strides the tensor-core kernel cannot vector-load run the
  // scalar kernel (the mask too: the coopmat2 kernels load its tiles as 16-byte words).
  const bool aligned = VectorAligned({buffers.q, buffers.k, buffers.v, buffers.o, buffers.mask}) && call.vector_strides;
  VKF_ASSIGN_OR_RETURN(const KernelChoice choice,
                       ChooseForwardKernel(info_, call.planning, /*scalar_only=*/instrumented || !aligned, overrides_));
  const NamedView stats{"stats", stats_view, ForwardStatsBytes(shape, choice)};
  if (instrumented) VKF_RETURN_IF_ERROR(CheckViews(info_, {stats}));

  // With no key rows, K and V are never read, and every row gets O = 0, LSE = -inf. A zero-sized
  // range cannot be bound, so Q stands in for them.
  NamedView k{"k", buffers.k, call.required_bytes[VKF_TENSOR_K]};
  NamedView v{"v", buffers.v, call.required_bytes[VKF_TENSOR_V]};
  if (k.required_bytes == 0) {
    k.view = v.view = buffers.q;
  } else {
    VKF_RETURN_IF_ERROR(CheckViews(info_, {k, v}));
  }

  // The workspace: the sequence table; on a driver with a loop budget, the state of long key loops
  // run in chunks (common/shader_interface.h, AttentionPush.chunk_*); a decode call's parts.
  uint32_t decode_splits = 1, split_keys = UINT32_MAX, chunks = 1, chunk_length = 0;
  StateParts state;
  if (IsDecode(choice)) {
    VKF_ASSIGN_OR_RETURN(DecodeSplits split, PlanDecodeSplits(info_, call.planning, choice, overrides_));
    if (split.splits > 1 && buffers.workspace.empty()) {  // one part, where the loop budget allows
      TileOverrides one_part = overrides_;
      one_part.decode_splits = 1;
      VKF_ASSIGN_OR_RETURN(split, PlanDecodeSplits(info_, call.planning, choice, one_part));
    }
    decode_splits = split.splits;
    split_keys = split.split_keys;
    state = DecodeStateParts(info_, call, decode_splits);
  } else {
    VKF_ASSIGN_OR_RETURN(const ChunkPlan plan, Chunks(choice, call.planning, instrumented));
    chunks = plan.chunks;
    chunk_length = plan.length;
    state = ForwardStateParts(info_, call, choice, chunks > 1);
  }
  const NamedView workspace{"workspace", buffers.workspace, state.total, state.largest()};
  std::vector<NamedView> outputs = {o};
  if (!buffers.lse.empty()) outputs.push_back(lse);
  if (instrumented) outputs.push_back(stats);
  if (state.total > 0) {
    if (buffers.workspace.empty()) {
      if (call.sequence_table_bytes() > 0) return NeedsWorkspace(state.total, "the sequences' lengths are kept there");
      if (state.mask_tiles_bytes > 0) return NeedsWorkspace(state.total, "the mask's block summary is kept there");
      return NeedsWorkspace(state.total, IsDecode(choice) ? "this driver ends long shader loops early, so the keys are "
                                                            "split over " + std::to_string(decode_splits) +
                                                                " workgroups per KV head"
                                                          : "this driver ends long shader loops early, so the keys "
                                                            "are walked in " + std::to_string(chunks) + " chunks");
    }
    VKF_RETURN_IF_ERROR(CheckViews(info_, {workspace}));
    outputs.push_back(workspace);
  }
  VKF_ASSIGN_OR_RETURN(const std::vector<NamedView> score_mods,
                       CheckScoreModViews(info_, params, buffers.alibi_slopes, buffers.sinks, buffers.mask));
  std::vector<NamedView> inputs = {q, k, v};
  inputs.insert(inputs.end(), score_mods.begin(), score_mods.end());
  VKF_RETURN_IF_ERROR(CheckNoOverlap(outputs, inputs));

  // The decode merge dispatches one workgroup per query row.
  const uint32_t group_count_x = IsDecode(choice) ? decode_splits : (shape.q_len + choice.block_q - 1) / choice.block_q;
  const bool merge = IsDecode(choice) && decode_splits > 1;
  if (group_count_x > info_.max_workgroup_count[0] || (merge && shape.q_len > info_.max_workgroup_count[0]) ||
      shape.q_heads > info_.max_workgroup_count[1] || shape.batch > info_.max_workgroup_count[2]) {
    return Status::Error(ErrorCode::kUnsupported, "q_len / splits / q_heads / batch exceed maxComputeWorkGroupCount");
  }

  // Unused bindings still need a valid buffer: O stands in (never touched then).
  std::array<BufferView, VKF_FWD_BINDING_COUNT> bindings;
  bindings.fill(o.view);
  bindings[VKF_FWD_BINDING_Q] = q.view;
  bindings[VKF_FWD_BINDING_K] = k.view;
  bindings[VKF_FWD_BINDING_V] = v.view;
  if (!buffers.lse.empty()) bindings[VKF_FWD_BINDING_LSE] = buffers.lse;
  if (instrumented) bindings[VKF_FWD_BINDING_STATS] = stats_view;
  if (params.alibi != AlibiSlopes::kNone) bindings[VKF_FWD_BINDING_ALIBI] = buffers.alibi_slopes;
  if (params.sinks) bindings[VKF_FWD_BINDING_SINKS] = buffers.sinks;
  if (params.mask.type != MaskType::kNone && MaskElements(params) > 0) bindings[VKF_FWD_BINDING_MASK] = buffers.mask;
  if (state.o_bytes > 0) {
    bindings[VKF_FWD_BINDING_O_STATE] = WorkspacePart(buffers.workspace, state.o_offset, state.o_bytes);
    bindings[VKF_FWD_BINDING_ROW_STATE] = WorkspacePart(buffers.workspace, state.row_offset, state.row_bytes);
  }
  // The mask's block summary first: where it fails (its limits), nothing has been recorded. Its
  // place in the workspace is kept for every kernel that may run the call (unaligned views run the
  // per-row kernel), but a decode call over short parts reads the mask itself (DecodeReadsMaskSummary).
  const uint32_t term_rows = IsDecode(choice) ? DecodeMaskTermRows(call) : 1;
  const bool summarize =
      state.mask_tiles_bytes > 0 && (!IsDecode(choice) || DecodeReadsMaskSummary(choice, split_keys, term_rows));
  if (summarize) {  // the kernels skip the tiles the summary shows closed
    bindings[VKF_FWD_BINDING_MASK_TILES] =
        WorkspacePart(buffers.workspace, state.mask_tiles_offset, state.mask_tiles_bytes);
    VKF_RETURN_IF_ERROR(mask_tiles_->Record(cmd, call, buffers.mask, bindings[VKF_FWD_BINDING_MASK_TILES]));
    vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
  }
  if (state.table_bytes > 0) {
    bindings[VKF_FWD_BINDING_SEQUENCES] = WorkspacePart(buffers.workspace, state.table_offset, state.table_bytes);
    RecordSequenceTable(cmd, call, bindings[VKF_FWD_BINDING_SEQUENCES]);
  }
  gpu::AttentionPush push = MakeAttentionPush(call);
  push.split_keys = split_keys;
  if (IsDecode(choice)) {
    // Without a mask the constant changes nothing: one pipeline whatever the parts' length.
    // TERM_ROWS only counts without the summary: elsewhere 1, so that no pipeline differs by it.
    const bool mask_summary = state.mask_tiles_bytes == 0 || summarize;
    if (term_rows > choice.block_q) {  // the kernels' arrays hold BLOCK_Q rows (DecodeMaskTermRows)
      return Status::Error(ErrorCode::kUnsupported, "internal: mask term rows " + std::to_string(term_rows) +
                                                        " exceed the decode kernel's " + std::to_string(choice.block_q));
    }
    const DecodeMaskReads mask_reads{mask_summary, mask_summary ? 1u : term_rows};
    return RecordDecode(cmd, call, choice, bindings, push, decode_splits, !buffers.lse.empty(), mask_reads);
  }

  VKF_ASSIGN_OR_RETURN(VkPipeline pipeline,
                       Pipeline(choice, call.planning, /*write_lse=*/!buffers.lse.empty(), instrumented, chunks > 1));
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
  for (uint32_t chunk = 0; chunk < chunks; ++chunk) {
    if (chunks > 1) {
      push.chunk_begin = chunk * chunk_length;
      push.chunk_end = chunk + 1 == chunks ? shape.kv_len : (chunk + 1) * chunk_length;
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
                                            bool write_lse, bool instrument, bool chunked, DecodeMaskReads mask_reads) {
  const vk::ShaderBlob* shader = vk::FindShader(kernel.kernel);
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, "kernel '" + kernel.kernel + "' is not built");
  SpecConstants spec = MakeSpecConstants(kernel, params, write_lse, instrument, chunked, mask_reads);
  if (!kernel.family.empty()) {  // the decode merge is no family's choice
    VKF_ASSIGN_OR_RETURN(const KernelBackend* family, BackendOf(kernel));
    family->SetSpecConstants(kernel, coopmat_layout_, &spec);
  }
  return pipelines_.Get(*shader, layout_->pipeline_layout(), spec);
}

Status ForwardOperator::RecordDecode(VkCommandBuffer cmd, const CallLayout& call, const KernelChoice& choice,
                                     const std::array<BufferView, VKF_FWD_BINDING_COUNT>& bindings,
                                     const gpu::AttentionPush& push, uint32_t splits, bool write_lse,
                                     DecodeMaskReads mask_reads) {
  const AttentionShape& shape = call.planning.shape;
  const bool parts = splits > 1;
  KernelChoice combine;
  combine.kernel = "decode_combine_f16";
  combine.workgroup_size = kCombineWorkgroupSize;
  VKF_ASSIGN_OR_RETURN(VkPipeline decode_pipeline,
                       Pipeline(choice, call.planning, write_lse, /*instrument=*/false, parts, mask_reads));
  VkPipeline combine_pipeline = VK_NULL_HANDLE;
  if (parts) {
    VKF_ASSIGN_OR_RETURN(combine_pipeline, Pipeline(combine, call.planning, write_lse, /*instrument=*/false, false));
  }

  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, decode_pipeline);
  VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
  vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
  vkCmdDispatch(cmd, splits, shape.kv_heads, shape.batch);
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
