#include "attention/backends/scalar_backend.h"

#include <string>

#include "attention/backends/tile_search.h"
#include "common/shader_interface.h"
#include "common/shared_memory_sizes.h"
#include "util/ceil_div.h"

namespace vkflash::attention {
namespace {

struct TileShape {
  uint32_t block_q, block_kv;
};

// (rows a workgroup owns, rows of each streamed tile), largest first: more owned rows amortize
// each streamed tile over more work.
constexpr TileShape kForwardTiles[] = {{32, 32}, {16, 32}, {16, 16}, {8, 16}, {8, 8}, {4, 8},
                                       {4, 4},   {2, 4},   {1, 4},   {1, 2},  {1, 1}};
constexpr uint32_t kThreadsPerRow[] = {8, 4, 2, 1};

bool ForwardFits(const DeviceInfo& device, uint32_t head_dim, TileShape tile, uint32_t threads_per_row, bool subgroup) {
  const uint32_t workgroup = tile.block_q * threads_per_row;
  if (workgroup > device.max_workgroup_invocations) return false;
  if (subgroup) {
    // Rows must not straddle subgroups, and every subgroup must be full (shuffles read lanes of
    // the same row only), whatever size in [min, max] the driver picks.
    if (threads_per_row > device.min_subgroup_size) return false;
    if (device.max_subgroup_size == 0 || workgroup % device.max_subgroup_size != 0) return false;
  }
  return ForwardSharedBytes(head_dim, tile.block_q, tile.block_kv, threads_per_row, subgroup) <=
         device.usable_shared_memory_bytes;
}

const char* DtypeSuffix(DataType dtype) { return dtype == DataType::kFloat16 ? "f16" : "f32"; }

Status NothingFits(const DeviceInfo& device, uint32_t head_dim) {
  return Status::Error(ErrorCode::kUnsupported,
                       "no tile fits head dim " + std::to_string(head_dim) + " in " +
                           std::to_string(device.usable_shared_memory_bytes) + " bytes of shared memory");
}

constexpr std::string_view kVariants[] = {"scalar"};

}  // namespace

std::span<const std::string_view> ScalarBackend::variants() const { return kVariants; }

uint32_t ForwardSharedBytes(uint32_t head_dim, uint32_t block_q, uint32_t block_kv, uint32_t threads_per_row,
                            bool subgroup_reductions) {
  const uint32_t head_vec4 = VKF_HEAD_VEC4(head_dim), stride = VKF_ODD_STRIDE(head_vec4);
  const uint32_t reduce = subgroup_reductions ? 0 : 4 * VKF_SMEM_ROW_REDUCE_FLOATS(block_q * threads_per_row);
  return 16 * (VKF_SMEM_OWNED_VEC4S(block_q, head_vec4) + VKF_SMEM_STREAMED_VEC4S(block_kv, stride)) +
         4 * VKF_SMEM_SCORE_FLOATS(block_q, block_kv) + reduce;
}

Result<KernelChoice> ScalarBackend::ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                                  const TileOverrides&) const {
  const uint32_t head_dim = params.shape.head_dim;
  for (bool subgroup : {true, false}) {
    if (subgroup && !device.use_subgroup_ops) continue;
    for (uint32_t threads_per_row : kThreadsPerRow) {
      for (TileShape tile : kForwardTiles) {
        if (!ForwardFits(device, head_dim, tile, threads_per_row, subgroup)) continue;
        KernelChoice choice;
        choice.kernel = std::string("forward_") + DtypeSuffix(params.dtype) + (subgroup ? "_subgroup" : "_shared");
        choice.block_q = tile.block_q;
        choice.block_kv = tile.block_kv;
        choice.threads_per_row = threads_per_row;
        choice.workgroup_size = tile.block_q * threads_per_row;
        choice.subgroup_reductions = subgroup;
        choice.shared_memory_bytes = ForwardSharedBytes(head_dim, tile.block_q, tile.block_kv, threads_per_row, subgroup);
        return choice;
      }
    }
  }
  return NothingFits(device, head_dim);
}

uint32_t BackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, bool dkdv) {
  const uint32_t head_vec4 = VKF_HEAD_VEC4(head_dim), stride = VKF_ODD_STRIDE(head_vec4);
  // Two owned tensors and two streamed ones; dK/dV: P^T, dS^T and the tile's LSE and delta, dQ: dS.
  const uint32_t vec4s = 2 * VKF_SMEM_OWNED_VEC4S(owned, head_vec4) + 2 * VKF_SMEM_STREAMED_VEC4S(streamed, stride);
  const uint32_t floats = dkdv ? 2 * VKF_SMEM_SCORE_FLOATS(owned, streamed) + 2 * VKF_SMEM_ROW_FLOATS(streamed)
                               : VKF_SMEM_SCORE_FLOATS(owned, streamed);
  return 16 * vec4s + 4 * floats;
}

Result<BackwardKernelChoice> ScalarBackend::ChooseBackward(const DeviceInfo& device, const AttentionParams& params,
                                                          const TileOverrides&) const {
  const uint32_t head_dim = params.shape.head_dim;
  // Both gradient kernels hold two owned row blocks and two streamed tiles: the forward's list
  // of (owned, streamed) shapes serves them too.
  auto choose = [&](bool dkdv) -> Result<KernelChoice> {
    for (uint32_t threads_per_row : kThreadsPerRow) {
      for (TileShape tile : kForwardTiles) {
        const uint32_t owned = tile.block_q, streamed = tile.block_kv;
        const uint32_t bytes = BackwardSharedBytes(head_dim, owned, streamed, dkdv);
        if (owned * threads_per_row > device.max_workgroup_invocations || bytes > device.usable_shared_memory_bytes) {
          continue;
        }
        KernelChoice choice;
        choice.kernel = std::string(dkdv ? "backward_dkdv_" : "backward_dq_") + DtypeSuffix(params.dtype);
        choice.block_q = dkdv ? streamed : owned;
        choice.block_kv = dkdv ? owned : streamed;
        choice.threads_per_row = threads_per_row;
        choice.workgroup_size = owned * threads_per_row;
        choice.subgroup_reductions = false;
        choice.shared_memory_bytes = bytes;
        return choice;
      }
    }
    return NothingFits(device, head_dim);
  };
  return BothBackwardKernels(choose);
}

namespace {

// Loop iterations of the scalar kernels' row reductions (scalar/row_reduce.glsl): a shuffle loop
// of log2(threads per row), or a loop over the row's invocations through shared memory.
uint64_t ReductionLoops(const KernelChoice& choice) {
  return choice.subgroup_reductions ? 8 : 2 * uint64_t(choice.threads_per_row);
}

}  // namespace

// Each term names the loop of shaders/scalar/attention_forward.comp it counts. A vec4 load or store of a
// tensor (tensor_io.glsl) loops over its 4 columns.
LoopCost ScalarForwardLoopCost(const KernelChoice& choice, uint32_t head_dim, bool instrumented) {
  const uint64_t head_vec4 = CeilDiv(head_dim, 4), lane_vec4s = CeilDiv(head_vec4, choice.threads_per_row);
  const uint64_t lane_keys = CeilDiv(choice.block_kv, choice.threads_per_row), reduce = ReductionLoops(choice);
  LoopCost cost;
  cost.fixed = CeilDiv(uint64_t(choice.block_q) * head_vec4, choice.workgroup_size) * 5  // Q tile
               + 3 * lane_vec4s                                                        // zero, resume, rescale O
               + 5 * lane_vec4s                                                        // store O or the state
               + reduce + 8;                                                           // row sum, slack
  cost.per_step = 2 * CeilDiv(uint64_t(choice.block_kv) * head_vec4, choice.workgroup_size) * 5  // K, V tiles
                  + lane_keys * (1 + head_vec4)                                       // S
                  + reduce + lane_keys + lane_vec4s                                   // row max, P, rescale O
                  + lane_vec4s * (1 + uint64_t(choice.block_kv))                      // O += P V
                  + (instrumented ? 2 * reduce : 0) + 1;                              // statistics, the tile loop
  return cost;
}

// ...of shaders/scalar/attention_backward_dq.comp (Q and dO rows, then K and V tiles: two loads each).
LoopCost ScalarDqLoopCost(const KernelChoice& choice, uint32_t head_dim) {
  const uint64_t head_vec4 = CeilDiv(head_dim, 4), lane_vec4s = CeilDiv(head_vec4, choice.threads_per_row);
  LoopCost cost;
  cost.fixed = CeilDiv(uint64_t(choice.block_q) * head_vec4, choice.workgroup_size) * 9  // Q, dO rows
               + lane_vec4s * (1 + 5 + 5 + 5) + 8;                                     // zero, resume, store, slack
  cost.per_step = CeilDiv(uint64_t(choice.block_kv) * head_vec4, choice.workgroup_size) * 9  // K, V tiles
                  + CeilDiv(choice.block_kv, choice.threads_per_row) * (1 + head_vec4)    // dS
                  + lane_vec4s * (1 + uint64_t(choice.block_kv)) + 1;                     // dQ += dS K, loop
  return cost;
}

// ...of shaders/scalar/attention_backward_dkdv.comp (its K and V rows, then Q and dO tiles).
LoopCost ScalarDkdvLoopCost(const KernelChoice& choice, uint32_t head_dim) {
  const uint64_t head_vec4 = CeilDiv(head_dim, 4), lane_vec4s = CeilDiv(head_vec4, choice.threads_per_row);
  LoopCost cost;
  cost.fixed = CeilDiv(uint64_t(choice.block_kv) * head_vec4, choice.workgroup_size) * 9  // K, V rows
               + lane_vec4s * (1 + 9 + 9) + 1 + 8;                 // zero, resume, store; heads loop; slack
  cost.per_step = CeilDiv(uint64_t(choice.block_q) * head_vec4, choice.workgroup_size) * 9  // Q, dO tiles
                  + CeilDiv(choice.block_q, choice.workgroup_size)                          // LSE, delta
                  + CeilDiv(choice.block_q, choice.threads_per_row) * (1 + head_vec4)       // P^T, dS^T
                  + lane_vec4s * (1 + uint64_t(choice.block_q)) + 2;  // dV, dK sums; tile and heads loops
  return cost;
}

}  // namespace vkflash::attention
