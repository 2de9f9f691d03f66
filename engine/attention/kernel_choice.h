// Which kernel and tiles run a call: the first kernel family (backends/kernel_backend.h) that
// applies to the call and whose tiles fit the device's limits (shared memory, workgroup size,
// subgroup sizes and operations), never a GPU's name.
#pragma once

#include <vkflash/device_info.hpp>

#include "attention/chunk_plan.h"

namespace vkflash::attention {

// scalar_only: instrumented calls and views the tensor-core kernels cannot vector-load; they then
// run the scalar per-row kernels (the register-tiled ones load 16 bytes too). kUnsupported
// when nothing fits or the device cannot store the dtype.
// `overrides`: tiles the families try first (ContextOptions::tile_overrides).
Result<KernelChoice> ChooseForwardKernel(const DeviceInfo& device, const AttentionParams& params, bool scalar_only,
                                         const TileOverrides& overrides = {});
Result<BackwardKernelChoice> ChooseBackwardKernels(const DeviceInfo& device, const AttentionParams& params,
                                                   bool scalar_only, const TileOverrides& overrides = {});

// Invocations per workgroup of the backward's preprocess (delta = rowsum(dO * O)), whole rows of
// VKF_PREPROCESS_THREADS_PER_ROW: 256 where the device allows it, else Vulkan's minimum of 128.
uint32_t PreprocessWorkgroupSize(const DeviceInfo& device);

// The backward's preprocess (delta = rowsum(dO * O)), every family's: block_q rows per workgroup of
// PreprocessWorkgroupSize invocations, VKF_PREPROCESS_THREADS_PER_ROW per row.
KernelChoice PreprocessChoice(const DeviceInfo& device, const AttentionParams& params);
// The sinks' gradient (BackwardBuffers::dsinks), every family's: one workgroup per query head.
KernelChoice DsinksChoice(const DeviceInfo& device);
// The bias's gradient (BackwardBuffers::dbias), every family's: one workgroup per tile of
// block_q x block_kv elements of dBias.
KernelChoice DbiasChoice(const AttentionParams& params);
// Its loops (chunk_plan.h), per tile step of the walk over the pairs that map to an element.
LoopCost DbiasLoopCost(const KernelChoice& dbias, uint32_t head_dim);
// The last kernel of a backward with atomic dQ (BackwardKernelChoice::atomic_dq): it scales the
// float32 dQ sums and stores dQ, dispatched as the preprocess is.
KernelChoice DqFromSumsChoice(const DeviceInfo& device, const AttentionParams& params);

// DeviceInfo::compute_units, or 16 where the device does not report them: what the workgroup
// counts meant to fill the device (decode split-K, the read probe) assume.
uint32_t ComputeUnitsOrAssumed(const DeviceInfo& device);

}  // namespace vkflash::attention
