// Tile choice for the tensor-core (cooperative-matrix) kernels, from the device's limits: shared
// memory, workgroup size, subgroup size. Every tile is a whole number of 16x16 blocks; a
// subgroup owns 16-row blocks of the output and keeps their accumulators in registers.
#pragma once

#include <vkflash/vkflash.hpp>

namespace vkflash::attention {

// Tensor-core kernels may run this call: the device has them (DeviceInfo::cooperative_matrix),
// float16 tensors, head dim a multiple of 16 up to 256 (backward: up to 128).
bool CoopmatApplies(const DeviceInfo& device, const AttentionParams& params);

// Shared memory of shaders/attention_forward_coopmat.comp: K and V tiles with padded rows, the
// coordinate matrix, and (KHR) the per-subgroup accumulator-to-operand scratch.
uint32_t CoopmatForwardSharedBytes(uint32_t head_dim, uint32_t block_kv, uint32_t subgroups, CooperativeMatrixApi api);

// Shared memory of shaders/attention_backward_{dkdv,dq}_coopmat.comp: `owned` rows (dK/dV only:
// its K and V rows), two streamed tiles of `streamed` rows, per-row LSE and delta (dK/dV).
uint32_t CoopmatBackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, uint32_t subgroups,
                                    bool dkdv, CooperativeMatrixApi api);

// The first tile of the table that fits; kUnsupported if none does. The forward table can be
// replaced for tuning: VKFLASH_COOPMAT_FORWARD_TILE=SxMxK (subgroups x 16-row blocks per
// subgroup x keys per tile) is tried first.
Result<KernelChoice> ChooseCoopmatForward(const DeviceInfo& device, const AttentionParams& params);
// The VK_NV_cooperative_matrix2 forward kernel may run this call: the device uses it
// (DeviceInfo::use_cooperative_matrix2), float16 tensors, head dim a multiple of the granularity
// up to 256.
bool Coopmat2Applies(const DeviceInfo& device, const AttentionParams& params);

// Tiles of the VK_NV_cooperative_matrix2 kernels. The forward: owned rows x streamed rows x
// workgroup size from a table, at a workgroup size the device lists for workgroup-scope matrices
// and dimensions that are multiples of the granularity, whose staged K and V rows fit the usable
// shared memory. The backward kernels: subgroups (16 or 32 owned rows each) x streamed rows
// from a table, at the granularity of the device's subgroup-scope matrices and a single subgroup
// size, whose shared rows fit; head dims up to 128. For tuning, VKFLASH_COOPMAT2_{FORWARD,DKDV,DQ}_
// TILE=OxSxW (owned x streamed x workgroup size; backward: O / (W / subgroup size) rows per
// subgroup, 16 or 32) is tried first. Some forward tiles are only for long rows: at least a
// number of keys per query row on average (MeanVisibleKeys).
Result<KernelChoice> ChooseCoopmat2Forward(const DeviceInfo& device, const AttentionParams& params);
Result<BackwardKernelChoice> ChooseCoopmat2Backward(const DeviceInfo& device, const AttentionParams& params);

Result<BackwardKernelChoice> ChooseCoopmatBackward(const DeviceInfo& device, const AttentionParams& params);

// Keys a query row sees, on average over the rows: kv_len, or with the causal mask (bottom-right
// aligned, docs/design.md) kv_len - (q_len - 1) / 2 where kv_len >= q_len, else kv_len (kv_len + 1) /
// (2 q_len).
double MeanVisibleKeys(uint32_t q_len, uint32_t kv_len, bool causal);

}  // namespace vkflash::attention
