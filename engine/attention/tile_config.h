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

// Invocations per workgroup of the backward's preprocess (delta = rowsum(dO * O)), whole rows of
// VKF_PREPROCESS_THREADS_PER_ROW: 256 where the device allows it, else Vulkan's minimum of 128.
uint32_t PreprocessWorkgroupSize(const DeviceInfo& device);

}  // namespace vkflash::attention
