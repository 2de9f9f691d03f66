// The decode family (shaders/decode/): the forward for few query rows per KV head over many keys,
// as in generating text over a KV cache. One workgroup takes every query row of a KV head's group
// (grouped-query packing), so K and V are read once per group, and the keys are split over
// workgroups (split-K, flash-decoding) so that a handful of heads still fills the device; a second
// pass merges the parts by their LSE. Bound by reading K and V: no tensor cores, float16 only.
// Forward only: ChooseBackward gives way to the next family.
#pragma once

#include "attention/backends/kernel_backend.h"
#include "attention/chunk_plan.h"

namespace vkflash::attention {

// Query rows a decode workgroup holds in registers: (q_heads / kv_heads) * q_len at most. More
// (speculative decoding, a short prompt over a long cache), up to kDecodeMaxTensorCoreRows, run the
// tensor-core decode kernel where the Context uses VK_NV_cooperative_matrix2; beyond, the prefill
// kernels' query tiles are full enough.
constexpr uint32_t kDecodeMaxRows = 8;
constexpr uint32_t kDecodeMaxTensorCoreRows = 64;
// Invocations of the merge pass (attention_decode_combine.comp), one workgroup per query row; a
// power of two of at least head_dim / 4.
constexpr uint32_t kCombineWorkgroupSize = 128;

class DecodeBackend final : public KernelBackend {
 public:
  const char* name() const override { return "decode"; }
  std::span<const std::string_view> variants() const override;
  // Subgroup shuffles and 16-bit storage.
  std::string WhyUnusable(const DeviceInfo& device, std::string_view variant) const override;
  // DeviceInfo::use_decode_kernels.
  void Use(DeviceInfo* device, std::string_view) const override { device->use_decode_kernels = true; }
  void Unuse(DeviceInfo* device) const override { device->use_decode_kernels = false; }
  bool Used(const DeviceInfo& device) const override { return device.use_decode_kernels; }
  // Split-K keeps each workgroup's loop inside the driver's loop budget (PlanDecodeSplits).
  bool runs_within_loop_budget() const override { return true; }
  // float16, head dim a multiple of 8 up to 256, packed rows (q_heads / kv_heads) * q_len up to
  // kDecodeMaxRows, or kDecodeMaxTensorCoreRows where the tensor-core kernel runs.
  bool Applies(const DeviceInfo& device, const AttentionParams& params) const override;
  // Up to kDecodeMaxRows packed rows, the register kernel: key groups of THREADS_PER_ROW invocations
  // (a power of two within the subgroup, at most 16), 128 invocations, BLOCK_Q = the packed rows, BLOCK_KV = keys
  // the workgroup loads per step. More: the tensor-core kernel (ChooseCoopmat2DecodeTile).
  Result<KernelChoice> ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                     const TileOverrides& overrides) const override;
  // The tensor-core kernel's row-vector width (as the coopmat2 family's).
  void SetSpecConstants(const KernelChoice& choice, const CoopmatLayout& layout, SpecConstants* spec) const override;
  Result<BackwardKernelChoice> ChooseBackward(const DeviceInfo& device, const AttentionParams& params,
                                              const TileOverrides& overrides) const override;
};

// Whether a decode call skips the tiles a mask closes by the mask's block summary, which a pass
// before the kernel makes (MaskTilesOperator; the workspace keeps its place either way): the
// tensor-core kernel always does. The register kernel does for parts of more than
// kMaskTermsMaxSteps steps (split_keys / BLOCK_KV); for shorter ones it finds the steps the mask
// closes from the mask's own elements, read two steps ahead (VKF_SPEC_MASK_SUMMARY = 0). The pass
// and its barrier cost a call ~4 us on the H100, the reads a little every step, more where the
// mask closes most of them: 16 steps is where a mask with 75% of its blocks closed broke even
// (docs/tuning-log.md, "the register decode kernel and the mask's block summary").
constexpr uint32_t kMaskTermsMaxSteps = 16;
bool DecodeReadsMaskSummary(const KernelChoice& choice, uint32_t split_keys);

// How a decode call splits its keys: `splits` parts of `split_keys` keys (a multiple of BLOCK_KV;
// the last part shorter), each a workgroup per (KV head, batch). At most 2 workgroups per
// compute unit, rounded down (DeviceInfo::compute_units; 16 where unknown), parts of at least a few hundred
// keys (the merge reads every part's O), and no part past half the driver's loop budget.
// overrides.decode_splits, where set, is the count asked for.
struct DecodeSplits {
  uint32_t splits = 1;
  uint32_t split_keys = 0;
};
Result<DecodeSplits> PlanDecodeSplits(const DeviceInfo& device, const AttentionParams& params,
                                      const KernelChoice& choice, const TileOverrides& overrides);

// Workspace of a split call: every row's normalized O and base-2 LSE per part, float32.
uint64_t DecodePartialOBytes(const AttentionShape& shape, uint32_t splits);
uint64_t DecodePartialLseBytes(const AttentionShape& shape, uint32_t splits);

}  // namespace vkflash::attention
