#include "attention/backward_op.h"

#include <algorithm>
#include <array>

#include "attention/buffer_checks.h"
#include "attention/call_layout.h"
#include "attention/kernel_constants.h"
#include "attention/backends/coopmat2_backend.h"
#include "attention/backends/kernel_backend.h"
#include "attention/backends/scalar_backend.h"
#include "attention/chunk_plan.h"
#include "attention/kernel_choice.h"
#include "attention/mask_tiles_op.h"
#include "attention/workspace_layout.h"
#include "util/ceil_div.h"
#include "util/status_macros.h"
#include "vulkan/barriers.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
namespace {

// The dbias kernel's dispatch: workgroups over the mask's elements, and the steps of the walk each
// invocation takes over the tiles of pairs that map to its element: one per dimension the mask
// has, the whole extent of the others (shaders/scalar/attention_backward_dbias.comp).
struct DbiasWalk {
  uint32_t groups_x = 0, groups_y = 0;
  uint64_t groups_z = 0, steps = 0, invocations = 0;
};
DbiasWalk DbiasWalkOf(const CallLayout& call, const KernelChoice& kernel) {
  const MaskShape& mask = call.mask;
  const AttentionShape& shape = call.planning.shape;  // the lengths the kernel's push constants hold
  DbiasWalk walk;
  walk.groups_x = uint32_t(CeilDiv(mask.mask_keys(), kernel.block_kv));
  walk.groups_y = uint32_t(CeilDiv(mask.mask_rows(), kernel.block_q));
  walk.groups_z = uint64_t(mask.mask_batch()) * mask.mask_heads();
  walk.steps = uint64_t(mask.batch / mask.mask_batch()) * (mask.heads / mask.mask_heads()) *
               (mask.dims & VKF_MASK_HAS_ROWS ? 1 : CeilDiv(shape.q_len, kernel.block_q)) *
               (mask.dims & VKF_MASK_HAS_KEYS ? 1 : CeilDiv(shape.kv_len, kernel.block_kv));
  walk.invocations = uint64_t(walk.groups_x) * walk.groups_y * walk.groups_z * kernel.workgroup_size;
  return walk;
}

// The backward's workspace: the sequence table (with sequences), the mask's block summary (with a
// mask), delta per query row (laid out as
// the LSE), and where a gradient kernel runs in chunks, the float32 sums it keeps between them
// (VKF_BWD_BINDING_*_STATE; rows of the planning shape; the dbias kernel's one per invocation);
// with atomic dQ, dQ's float32 sums (as the chunked dQ kernel's); with stored dS, a chunk's slots
// of dS^T (in the dQ sums' place).
struct WorkspaceParts {
  VkDeviceSize table_offset = 0, table_bytes = 0;
  VkDeviceSize mask_tiles_offset = 0, mask_tiles_bytes = 0;
  VkDeviceSize delta_offset = 0, delta_bytes = 0;
  VkDeviceSize dq_offset = 0, dq_bytes = 0;
  VkDeviceSize dk_offset = 0, dv_offset = 0, dkdv_bytes = 0;
  VkDeviceSize dbias_offset = 0, dbias_bytes = 0;
  VkDeviceSize total = 0;
};
WorkspaceParts BackwardWorkspaceParts(const DeviceInfo& device, const CallLayout& call, VkDeviceSize dq_bytes,
                                      bool dkdv_chunked, VkDeviceSize dbias_bytes) {
  const AttentionShape& shape = call.planning.shape;
  WorkspaceLayout layout(device);
  WorkspaceParts parts;
  parts.table_bytes = call.sequence_table_bytes();
  if (parts.table_bytes > 0) parts.table_offset = layout.Add(parts.table_bytes);
  parts.mask_tiles_bytes = MaskTilesOperator::SummaryBytes(call);
  if (parts.mask_tiles_bytes > 0) parts.mask_tiles_offset = layout.Add(parts.mask_tiles_bytes);
  parts.delta_bytes = call.required_bytes[VKF_TENSOR_LSE];
  parts.delta_offset = layout.Add(parts.delta_bytes);
  if (dq_bytes > 0) {
    parts.dq_bytes = dq_bytes;
    parts.dq_offset = layout.Add(parts.dq_bytes);
  }
  if (dkdv_chunked) {
    parts.dkdv_bytes = shape.kv_elements() * sizeof(float);
    parts.dk_offset = layout.Add(parts.dkdv_bytes);
    parts.dv_offset = layout.Add(parts.dkdv_bytes);
  }
  if (dbias_bytes > 0) {
    parts.dbias_bytes = dbias_bytes;
    parts.dbias_offset = layout.Add(parts.dbias_bytes);
  }
  parts.total = layout.bytes();
  return parts;
}
// ...for a call that runs `choice` in `plans`: dQ sums with atomic dQ or a chunked dQ kernel, a
// chunk's dS^T slots with stored dS.
WorkspaceParts BackwardWorkspaceParts(const DeviceInfo& device, const CallLayout& call,
                                      const BackwardKernelChoice& choice, const BackwardOperator::Plans& plans,
                                      const TileOverrides& overrides) {
  const AttentionShape& shape = call.planning.shape;
  VkDeviceSize dq_bytes = 0;
  if (choice.stored_ds) {
    dq_bytes = VkDeviceSize(StoredDsChunkPairs(device, shape, overrides.stored_ds_max_mib)) * StoredDsPairBytes(shape);
  } else if (plans.dq.chunks > 1 || choice.atomic_dq) {
    dq_bytes = shape.q_elements() * sizeof(float);
  }
  const VkDeviceSize dbias_bytes =
      plans.dbias.chunks > 1 ? DbiasWalkOf(call, DbiasChoice(call.planning)).invocations * sizeof(float) : 0;
  return BackwardWorkspaceParts(device, call, dq_bytes, plans.dkdv.chunks > 1, dbias_bytes);
}

}  // namespace

Result<std::unique_ptr<BackwardOperator>> BackwardOperator::Create(const vk::Device& device, const DeviceInfo& info,
                                                                   const TileOverrides& overrides, const CoopmatLayout& layout,
                                                                   vk::PipelineStore& pipelines) {
  auto op = std::unique_ptr<BackwardOperator>(new BackwardOperator(info, overrides, layout, pipelines));
  VKF_ASSIGN_OR_RETURN(op->layout_, vk::KernelLayout::Create(device, VKF_BWD_BINDING_COUNT, sizeof(gpu::AttentionPush)));
  VKF_ASSIGN_OR_RETURN(op->mask_tiles_, MaskTilesOperator::Create(device, info, pipelines));
  return op;
}

Result<BackwardOperator::Plans> BackwardOperator::ChunkPlans(const BackwardKernelChoice& choice,
                                                             const CallLayout& call) const {
  const AttentionShape& shape = call.planning.shape;
  Plans plans;
  // Tensor cores: no budget there. A kernel that is not dispatched (no keys, no queries) is not split.
  if (choice.dkdv.cooperative_matrix == CooperativeMatrixApi::kNone && shape.kv_elements() > 0) {
    const uint64_t q_tiles = (uint64_t(shape.q_len) + choice.dkdv.block_q - 1) / choice.dkdv.block_q;
    const uint64_t steps = q_tiles * (shape.q_heads / shape.kv_heads);
    VKF_ASSIGN_OR_RETURN(plans.dkdv, PlanChunks(info_, ScalarDkdvLoopCost(choice.dkdv, shape.head_dim), steps, 1));
  }
  if (choice.dq.cooperative_matrix == CooperativeMatrixApi::kNone && !choice.atomic_dq && shape.q_elements() > 0) {
    const uint64_t tiles = (uint64_t(shape.kv_len) + choice.dq.block_kv - 1) / choice.dq.block_kv;
    VKF_ASSIGN_OR_RETURN(plans.dq, PlanChunks(info_, ScalarDqLoopCost(choice.dq, shape.head_dim), tiles,
                                              choice.dq.block_kv));
  }
  // Every family's dbias kernel is the scalar one: planned wherever the mask has a gradient, as the
  // caller may ask for it; where it cannot run, only a call that asks for it fails (Record).
  if (call.planning.mask.additive() && call.mask.elements() > 0) {
    const KernelChoice dbias = DbiasChoice(call.planning);
    const DbiasWalk walk = DbiasWalkOf(call, dbias);
    if (walk.steps > UINT32_MAX) {
      plans.dbias_status = Status::Error(ErrorCode::kUnsupported, "the bias's gradient would walk more than 2^32 "
                                                                  "tiles of pairs per element: a mask that "
                                                                  "broadcasts over fewer dimensions");
    } else if (auto plan = PlanChunks(info_, DbiasLoopCost(dbias, shape.head_dim), walk.steps, 1); plan.ok()) {
      plans.dbias = *plan;
    } else {
      plans.dbias_status = plan.status();
    }
  }
  return plans;
}

Result<uint64_t> BackwardOperator::WorkspaceBytes(const AttentionParams& params) const {
  VKF_ASSIGN_OR_RETURN(const CallLayout call, ResolveCallLayout(params, /*backward=*/true));
  uint64_t bytes = 0;
  // Views that turn out unaligned run the per-row scalar kernels (Record), whose chunks may differ.
  for (const bool scalar_only : {!call.vector_strides, true}) {
    VKF_ASSIGN_OR_RETURN(const BackwardKernelChoice choice,
                         ChooseBackwardKernels(info_, call.planning, scalar_only, overrides_));
    VKF_ASSIGN_OR_RETURN(const Plans plans, ChunkPlans(choice, call));
    bytes = std::max<uint64_t>(bytes, BackwardWorkspaceParts(info_, call, choice, plans, overrides_).total);
  }
  return bytes;
}

Result<BackwardKernelChoice> BackwardOperator::Choose(const AttentionParams& params) const {
  VKF_ASSIGN_OR_RETURN(const CallLayout call, ResolveCallLayout(params, /*backward=*/true));
  return ChooseBackwardKernels(info_, call.planning, /*scalar_only=*/!call.vector_strides, overrides_);
}

Result<VkPipeline> BackwardOperator::Pipeline(const KernelChoice& choice, const AttentionParams& params, bool chunked,
                                              bool zero_dq_sums) {
  const vk::ShaderBlob* shader = vk::FindShader(choice.kernel);
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, "kernel '" + choice.kernel + "' is not built");
  SpecConstants spec = MakeSpecConstants(choice, params, /*write_lse=*/false, /*instrument=*/false, chunked);
  spec[VKF_SPEC_ZERO_DQ_SUMS] = zero_dq_sums ? 1u : 0u;
  if (!choice.family.empty()) {  // the preprocess is every family's
    VKF_ASSIGN_OR_RETURN(const KernelBackend* family, BackendOf(choice));
    family->SetSpecConstants(choice, coopmat_layout_, &spec);
  }
  return pipelines_.Get(*shader, layout_->pipeline_layout(), spec);
}

Status BackwardOperator::Record(VkCommandBuffer cmd, const AttentionParams& params, const BackwardBuffers& buffers) {
  VKF_ASSIGN_OR_RETURN(const CallLayout call, ResolveCallLayout(params, /*backward=*/true));
  const AttentionShape& shape = call.planning.shape;  // lengths: the longest sequence's
  const bool has_queries = shape.q_elements() > 0, has_keys = shape.kv_elements() > 0;
  const bool write_dsinks = params.sinks && !buffers.dsinks.empty();
  const bool additive_mask = params.mask.additive();
  const bool write_dbias = additive_mask && !buffers.dbias.empty() && MaskElements(params) > 0;
  // Views given without their variant are refused even where there is nothing to compute.
  VKF_RETURN_IF_ERROR(CheckNoStrayScoreModViews(params, buffers.alibi_slopes, buffers.sinks, buffers.mask));
  if (!params.sinks && !buffers.dsinks.empty()) {
    return Status::Error(ErrorCode::kInvalidArgument, "buffer 'dsinks' is given but the call has no sinks (params.sinks)");
  }
  if (!additive_mask && !buffers.dbias.empty()) {
    return Status::Error(ErrorCode::kInvalidArgument, params.mask.type == MaskType::kBool
                                                          ? "buffer 'dbias' is given but a boolean mask has no gradient"
                                                          : "buffer 'dbias' is given but the call has no mask (params.mask)");
  }
  if (!has_queries && !has_keys && !write_dsinks && !write_dbias) return Status::Ok();

  const bool aligned = VectorAligned({buffers.q, buffers.k, buffers.v, buffers.d_o, buffers.dq, buffers.dk, buffers.dv,
                                      buffers.mask}) &&
                       call.vector_strides;
  VKF_ASSIGN_OR_RETURN(const BackwardKernelChoice choice,
                       ChooseBackwardKernels(info_, call.planning, /*scalar_only=*/!aligned, overrides_));
  VKF_ASSIGN_OR_RETURN(const Plans plans, ChunkPlans(choice, call));
  const WorkspaceParts parts = BackwardWorkspaceParts(info_, call, choice, plans, overrides_);

  const auto& bytes = call.required_bytes;  // dQ, dK, dV have the strides of Q, K, V
  NamedView q{"q", buffers.q, bytes[VKF_TENSOR_Q]}, o{"o", buffers.o, bytes[VKF_TENSOR_O]},
      d_o{"d_o", buffers.d_o, bytes[VKF_TENSOR_DO]}, dq{"dq", buffers.dq, bytes[VKF_TENSOR_Q]},
      lse{"lse", buffers.lse, bytes[VKF_TENSOR_LSE]},
      workspace{"workspace", buffers.workspace, parts.total,
                std::max({parts.table_bytes, parts.mask_tiles_bytes, parts.delta_bytes, parts.dq_bytes,
                          parts.dkdv_bytes, parts.dbias_bytes})};
  NamedView k{"k", buffers.k, bytes[VKF_TENSOR_K]}, v{"v", buffers.v, bytes[VKF_TENSOR_V]},
      dk{"dk", buffers.dk, bytes[VKF_TENSOR_K]}, dv{"dv", buffers.dv, bytes[VKF_TENSOR_V]};
  // Empty tensors cannot be bound: a non-empty one stands in (the kernels never touch it).
  if (has_queries) {
    VKF_RETURN_IF_ERROR(CheckViews(info_, {q, o, d_o, dq, lse, workspace}));
  } else if (parts.table_bytes > 0) {
    VKF_RETURN_IF_ERROR(CheckViews(info_, {workspace}));
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
    if (!has_queries && parts.table_bytes > 0) outputs.push_back(workspace);
  }
  // The score modifiers' inputs, and the sinks' gradient (written where asked for).
  VKF_ASSIGN_OR_RETURN(const std::vector<NamedView> score_mods,
                       CheckScoreModViews(info_, params, buffers.alibi_slopes, buffers.sinks, buffers.mask));
  inputs.insert(inputs.end(), score_mods.begin(), score_mods.end());
  const NamedView dsinks{"dsinks", buffers.dsinks, uint64_t(shape.q_heads) * sizeof(float)};
  if (write_dsinks) {
    VKF_RETURN_IF_ERROR(CheckViews(info_, {dsinks}));
    outputs.push_back(dsinks);
  }
  // The bias's gradient (an additive mask's only: a boolean mask has none).
  const NamedView dbias{"dbias", buffers.dbias, MaskElements(params) * sizeof(float)};
  if (write_dbias) {
    VKF_RETURN_IF_ERROR(CheckViews(info_, {dbias}));
    outputs.push_back(dbias);
  }
  VKF_RETURN_IF_ERROR(CheckNoOverlap(outputs, inputs));
  const KernelChoice dbias_kernel = DbiasChoice(params);
  const DbiasWalk dbias_walk = DbiasWalkOf(call, dbias_kernel);  // its loop: plans.dbias
  if (write_dbias) VKF_RETURN_IF_ERROR(plans.dbias_status);
  if (write_dbias && (dbias_walk.groups_x > info_.max_workgroup_count[0] ||
                      dbias_walk.groups_y > info_.max_workgroup_count[1] ||
                      dbias_walk.groups_z > info_.max_workgroup_count[2])) {
    return Status::Error(ErrorCode::kUnsupported, "the bias's gradient of this mask exceeds maxComputeWorkGroupCount");
  }
  const KernelChoice dsinks_kernel = DsinksChoice(info_);
  if (write_dsinks && info_.shader_loop_budget != 0 &&
      uint64_t(shape.batch) * ((shape.q_len + dsinks_kernel.workgroup_size - 1) / dsinks_kernel.workgroup_size) >
          info_.shader_loop_budget / 2) {
    return Status::Error(ErrorCode::kUnsupported, "the sinks' gradient over this many rows per head would outrun this "
                                                  "driver's shader loop budget");
  }
  const BufferView table = parts.table_bytes > 0 ? WorkspacePart(buffers.workspace, parts.table_offset, parts.table_bytes)
                                                 : BufferView{};
  if (!has_queries) q.view = o.view = d_o.view = dq.view = lse.view = workspace.view = buffers.k;
  if (!has_keys) k.view = v.view = dk.view = dv.view = buffers.q;
  if (!has_queries && !has_keys) {  // only the sinks' or bias's gradient (zeros): it stands in for the rest
    q.view = o.view = d_o.view = dq.view = lse.view = workspace.view = k.view = v.view = dk.view = dv.view =
        write_dsinks ? buffers.dsinks : buffers.dbias;
  }

  const KernelChoice preprocess = PreprocessChoice(info_, params);
  const uint32_t groups_dq = (shape.q_len + choice.dq.block_q - 1) / choice.dq.block_q;
  const uint32_t groups_dkdv = (shape.kv_len + choice.dkdv.block_kv - 1) / choice.dkdv.block_kv;
  const uint32_t groups_rows = (shape.q_len + preprocess.block_q - 1) / preprocess.block_q;
  if (groups_dq > info_.max_workgroup_count[0] || groups_dkdv > info_.max_workgroup_count[0] ||
      shape.q_heads > info_.max_workgroup_count[1] || shape.batch > info_.max_workgroup_count[2]) {
    return Status::Error(ErrorCode::kUnsupported, "lengths / heads / batch exceed maxComputeWorkGroupCount");
  }
  VKF_ASSIGN_OR_RETURN(VkPipeline preprocess_pipeline,
                       Pipeline(preprocess, call.planning, /*chunked=*/false, /*zero_dq_sums=*/choice.atomic_dq));
  VKF_ASSIGN_OR_RETURN(VkPipeline dkdv_pipeline, Pipeline(choice.dkdv, call.planning, plans.dkdv.chunks > 1));
  VKF_ASSIGN_OR_RETURN(VkPipeline dq_pipeline, Pipeline(choice.dq, call.planning, plans.dq.chunks > 1));
  VkPipeline dsinks_pipeline = VK_NULL_HANDLE;
  if (write_dsinks) {
    VKF_ASSIGN_OR_RETURN(dsinks_pipeline, Pipeline(dsinks_kernel, call.planning, /*chunked=*/false));
  }
  VkPipeline dbias_pipeline = VK_NULL_HANDLE;
  if (write_dbias) {
    VKF_ASSIGN_OR_RETURN(dbias_pipeline, Pipeline(dbias_kernel, call.planning, plans.dbias.chunks > 1));
  }

  std::array<BufferView, VKF_BWD_BINDING_COUNT> bindings;
  bindings[VKF_BWD_BINDING_Q] = q.view;
  bindings[VKF_BWD_BINDING_K] = k.view;
  bindings[VKF_BWD_BINDING_V] = v.view;
  bindings[VKF_BWD_BINDING_O] = o.view;
  bindings[VKF_BWD_BINDING_LSE] = lse.view;
  bindings[VKF_BWD_BINDING_DO] = d_o.view;
  bindings[VKF_BWD_BINDING_DELTA] =
      has_queries ? WorkspacePart(workspace.view, parts.delta_offset, parts.delta_bytes) : workspace.view;
  // The dQ sums: the chunked dQ kernel's state, or atomic dQ's. Unchunked kernels never touch their
  // sums, but a binding needs a buffer: each kernel's own output stands in (the dK/dV and dQ
  // dispatches run concurrently, so neither may alias the other's).
  bindings[VKF_BWD_BINDING_DQ_STATE] =
      parts.dq_bytes > 0 && has_queries ? WorkspacePart(workspace.view, parts.dq_offset, parts.dq_bytes) : dq.view;
  bindings[VKF_BWD_BINDING_DK_STATE] =
      plans.dkdv.chunks > 1 ? WorkspacePart(workspace.view, parts.dk_offset, parts.dkdv_bytes) : dk.view;
  bindings[VKF_BWD_BINDING_DV_STATE] =
      plans.dkdv.chunks > 1 ? WorkspacePart(workspace.view, parts.dv_offset, parts.dkdv_bytes) : dk.view;
  bindings[VKF_BWD_BINDING_DQ] = dq.view;
  bindings[VKF_BWD_BINDING_DK] = dk.view;
  bindings[VKF_BWD_BINDING_DV] = dv.view;
  bindings[VKF_BWD_BINDING_SEQUENCES] = table.empty() ? q.view : table;
  // Unused score-modifier bindings still need a buffer: Q stands in (never read then).
  bindings[VKF_BWD_BINDING_ALIBI] = params.alibi != AlibiSlopes::kNone ? buffers.alibi_slopes : q.view;
  bindings[VKF_BWD_BINDING_SINKS] = params.sinks ? buffers.sinks : q.view;
  bindings[VKF_BWD_BINDING_DSINKS] = write_dsinks ? buffers.dsinks : dq.view;
  bindings[VKF_BWD_BINDING_MASK] = params.mask.type != MaskType::kNone && MaskElements(params) > 0 ? buffers.mask : q.view;
  bindings[VKF_BWD_BINDING_DBIAS] = write_dbias ? buffers.dbias : dq.view;
  bindings[VKF_BWD_BINDING_DBIAS_STATE] = write_dbias && plans.dbias.chunks > 1
                                              ? WorkspacePart(workspace.view, parts.dbias_offset, parts.dbias_bytes)
                                              : bindings[VKF_BWD_BINDING_DBIAS];
  const bool summarize_mask = parts.mask_tiles_bytes > 0 && has_queries && has_keys;
  bindings[VKF_BWD_BINDING_MASK_TILES] =
      summarize_mask ? WorkspacePart(workspace.view, parts.mask_tiles_offset, parts.mask_tiles_bytes) : q.view;
  // The mask's block summary (read by the gradient kernels, after the preprocess's barrier) first:
  // where it fails (its limits), nothing has been recorded.
  if (summarize_mask) {
    VKF_RETURN_IF_ERROR(mask_tiles_->Record(cmd, call, buffers.mask, bindings[VKF_BWD_BINDING_MASK_TILES]));
  }
  if (!table.empty()) RecordSequenceTable(cmd, call, table);
  const gpu::AttentionPush push = MakeAttentionPush(call);

  // Descriptors stay bound across the three pipelines (one layout).
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, preprocess_pipeline);
  VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
  vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
  if (has_queries) {
    vkCmdDispatch(cmd, groups_rows, shape.q_heads, shape.batch);
    // delta is written by the preprocess and read by both gradient kernels; the dQ sums it zeroes
    // (atomic dQ) are added to by the dK/dV kernel; so is the mask's summary read.
    vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }
  if (write_dsinks) {  // reads delta and the LSE (no rows: writes zeros); runs beside the gradient kernels
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dsinks_pipeline);
    vkCmdDispatch(cmd, 1, shape.q_heads, 1);
  }
  if (write_dbias) {  // reads delta and the LSE; runs beside the gradient kernels
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dbias_pipeline);
    DispatchChunks(cmd, push, plans.dbias, uint32_t(dbias_walk.steps), dbias_walk.groups_x, dbias_walk.groups_y,
                   uint32_t(dbias_walk.groups_z));
  }
  if (choice.stored_ds) {  // the choice has queries and keys
    RecordStoredDs(cmd, push, shape, dkdv_pipeline, dq_pipeline, groups_dkdv, groups_dq);
    return Status::Ok();
  }
  if (has_keys) {  // with no queries this writes zero dK, dV
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dkdv_pipeline);
    DispatchChunks(cmd, push, plans.dkdv, (shape.q_heads / shape.kv_heads) * ((shape.q_len + choice.dkdv.block_q - 1) /
                                                                               choice.dkdv.block_q),
                   groups_dkdv, shape.kv_heads, shape.batch);
  }
  if (has_queries) {  // with no keys this writes zero dQ
    if (choice.atomic_dq && has_keys) {  // dQ from the sums the dK/dV dispatch added to
      vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    }
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dq_pipeline);
    DispatchChunks(cmd, push, plans.dq, shape.kv_len, groups_dq, shape.q_heads, shape.batch);
  }
  return Status::Ok();
}

void BackwardOperator::RecordStoredDs(VkCommandBuffer cmd, gpu::AttentionPush push, const AttentionShape& shape,
                                      VkPipeline dkdv_pipeline, VkPipeline dq_pipeline, uint32_t groups_dkdv,
                                      uint32_t groups_dq) {
  const uint64_t pairs = uint64_t(shape.batch) * shape.kv_heads;
  const uint32_t group = shape.q_heads / shape.kv_heads;
  const uint32_t chunk_pairs = StoredDsChunkPairs(info_, shape, overrides_.stored_ds_max_mib);  // > 0: chosen
  for (uint64_t first = 0; first < pairs; first += chunk_pairs) {
    const uint32_t count = uint32_t(std::min<uint64_t>(chunk_pairs, pairs - first));
    if (first > 0) {  // the last chunk's dQ dispatch has read the slots this one overwrites
      vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT,
                        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT);
    }
    push.chunk_begin = uint32_t(first);  // pairs below 2^32: batch and heads are dispatch counts
    vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dkdv_pipeline);
    vkCmdDispatch(cmd, groups_dkdv, count, 1);
    // dS^T written by the dK/dV dispatch, read by the dQ one
    vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dq_pipeline);
    vkCmdDispatch(cmd, groups_dq, count * group, 1);
  }
}

void BackwardOperator::DispatchChunks(VkCommandBuffer cmd, gpu::AttentionPush push, const ChunkPlan& plan,
                                      uint32_t loop_end, uint32_t groups_x, uint32_t groups_y, uint32_t groups_z) {
  for (uint32_t chunk = 0; chunk < plan.chunks; ++chunk) {
    if (plan.chunks > 1) {
      push.chunk_begin = chunk * plan.length;
      push.chunk_end = chunk + 1 == plan.chunks ? loop_end : (chunk + 1) * plan.length;
      if (chunk > 0) {  // each workgroup reads back the sums it wrote in the last chunk
        vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      }
    }
    vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    vkCmdDispatch(cmd, groups_x, groups_y, groups_z);
  }
}

}  // namespace vkflash::attention
