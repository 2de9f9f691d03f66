// Kernel and tile choice for the attention kernels, from the device's limits alone (shared
// memory, workgroup size, subgroup sizes and operations): never from a GPU's name.
#pragma once

#include <vkflash/vkflash.hpp>

#include <functional>

namespace vkflash::attention {

// Shared memory the scalar forward kernel declares for these tiles. Must match
// shaders/attention_forward.comp (vec4 q_tile and kv_tile with their padded rows, p_tile, the
// reduction scratch of the shared-memory variant).
uint32_t ForwardSharedBytes(uint32_t head_dim, uint32_t block_q, uint32_t block_kv, uint32_t threads_per_row,
                            bool subgroup_reductions);

// Tensor cores where CoopmatApplies (unless scalar_only: instrumented calls, unaligned views),
// else the largest scalar tiles that fit the device's usable limits. kUnsupported when nothing
// fits (or the device cannot store the dtype).
Result<KernelChoice> ChooseForwardKernel(const DeviceInfo& device, const AttentionParams& params, bool scalar_only);

// Shared memory of the backward gradient kernels (shaders/attention_backward_{dkdv,dq}.comp):
// `owned` rows stay in the workgroup, tiles of `streamed` rows pass through.
uint32_t BackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, bool dkdv);

// Both gradient kernels' choices from `choose(dkdv)`, or the first error.
Result<BackwardKernelChoice> BothBackwardKernels(const std::function<Result<KernelChoice>(bool dkdv)>& choose);

// Tensor cores where CoopmatApplies and the head dim is at most 128 (unless scalar_only), else
// scalar tiles.
Result<BackwardKernelChoice> ChooseBackwardKernels(const DeviceInfo& device, const AttentionParams& params,
                                                   bool scalar_only);

// How many loop iterations one invocation of a scalar kernel runs, at most: every loop of its
// source counted at its longest, as though the compiler unrolled none. `fixed` is run once per
// dispatch, `per_step` for each streamed tile (forward and dQ: a key tile; dK/dV: a query tile of
// one head). Used where the driver has a loop budget (DeviceInfo::shader_loop_budget).
struct LoopCost {
  uint64_t fixed = 0, per_step = 0;
};
LoopCost ScalarForwardLoopCost(const KernelChoice& choice, uint32_t head_dim, bool instrumented);
LoopCost ScalarDqLoopCost(const KernelChoice& choice, uint32_t head_dim);
LoopCost ScalarDkdvLoopCost(const KernelChoice& choice, uint32_t head_dim);

// How a scalar kernel's loop is split into dispatches: `chunks` of `length` each (keys for the
// forward and dQ, a multiple of the key tile; steps for dK/dV), the last one shorter. One chunk
// (the whole loop) where the device has no loop budget or the loop fits in half of it; a chunk
// takes at most half of the budget, the other half being margin for what LoopCost misses.
struct ChunkPlan {
  uint32_t chunks = 1;
  uint32_t length = 0;
};
// kUnsupported when not even one step fits the budget.
Result<ChunkPlan> PlanChunks(const DeviceInfo& device, const LoopCost& cost, uint64_t steps, uint32_t step_length);

// Invocations per workgroup of the backward's preprocess (delta = rowsum(dO * O)), whole rows of
// VKF_PREPROCESS_THREADS_PER_ROW: 256 where the device allows it, else Vulkan's minimum of 128.
uint32_t PreprocessWorkgroupSize(const DeviceInfo& device);

}  // namespace vkflash::attention
