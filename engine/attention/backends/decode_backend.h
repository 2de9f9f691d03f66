// The decode family (shaders/decode/): the forward for few query rows per KV head over many keys,
// as in generating text over a KV cache. One workgroup takes every query row of a KV head's group
// (grouped-query packing), so K and V are read once per group, and the keys are split over
// workgroups (split-K, flash-decoding) so that a handful of heads still fills the device; a second
// pass merges the parts by their LSE. Bound by reading K and V: no tensor cores, float16 only.
// Forward only: ChooseBackward gives way to the next family.
#pragma once

#include "attention/backends/kernel_backend.h"
#include "attention/call_layout.h"
#include "attention/chunk_plan.h"

namespace vkflash::attention {

// Query rows a decode workgroup holds in registers: (q_heads / kv_heads) * q_len at most. More
// (speculative decoding, a short prompt over a long cache), up to kDecodeMaxTensorCoreRows, run the
// tensor-core decode kernel where the Context uses VK_NV_cooperative_matrix2; beyond, the prefill
// kernels' query tiles are full enough.
constexpr uint32_t kDecodeMaxRows = 8;
// attention_forward_decode.comp's KEYS_IN_LANE_ORDER, (rows + 3) / 8, is 0 or 1 only up to 12 rows.
static_assert(kDecodeMaxRows <= 12);
constexpr uint32_t kDecodeMaxTensorCoreRows = 64;
// Invocations of the merge pass (attention_decode_combine.comp), one workgroup per query row; a
// power of two of at least head_dim / 4.
constexpr uint32_t kCombineWorkgroupSize = 128;

class DecodeBackend final : public KernelBackend {
 public:
  const char* name() const override { return "decode"; }
  std::span<const std::string_view> variants() const override;
  // Subgroup shuffles and votes, and 16-bit storage.
  std::string WhyUnusable(const DeviceInfo& device, std::string_view variant) const override;
  // DeviceInfo::use_decode_kernels.
  void Use(DeviceInfo* device, std::string_view) const override { device->use_decode_kernels = true; }
  void Unuse(DeviceInfo* device) const override { device->use_decode_kernels = false; }
  bool Used(const DeviceInfo& device) const override { return device.use_decode_kernels; }
  // Split-K keeps each workgroup's loop inside the driver's loop budget (PlanDecodeSplits);
  // ChooseForward declines a call whose step and merge of the groups' rows do not fit one.
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
// before the kernel makes (MaskTilesOperator; the workspace keeps its place either way), or finds
// them from the mask's own elements (VKF_SPEC_MASK_SUMMARY = 0), for `term_rows` of its packed rows
// (DecodeMaskTermRows). The pass and its barrier cost a call ~4 us on the H100.
// - The register kernel reads the summary for parts of more than kMaskTermsMaxSteps steps
//   (split_keys / BLOCK_KV); in shorter ones each lane reads its keys' terms two steps ahead. Those
//   reads cost a little every step, more where the mask closes most of them: 16 steps is where a
//   mask with 75% of its blocks closed broke even (docs/tuning-log.md, "the register decode kernel
//   and the mask's block summary").
// - The tensor-core kernel scans its part's elements before its loop where the part has at most 32
//   key tiles (one bit each) and the scan at most kMaskScanMaxPerInvocation elements per invocation:
//   2 gained ~3 us on the H100, 16 broke even, 64 lost 15 us (docs/tuning-log.md, "the
//   tensor-core decode kernel's closed tiles from the mask").
constexpr uint32_t kMaskTermsMaxSteps = 16;
constexpr uint32_t kMaskScanMaxPerInvocation = VKF_DECODE_SCAN_MAX_PER_INVOCATION;
bool DecodeReadsMaskSummary(const KernelChoice& choice, uint32_t split_keys, uint32_t term_rows);

// Of a decode kernel's packed rows (head-major: row r is query row r % q_len of the group's head
// r / q_len), how many read mask terms of their own where it reads the mask's elements
// (VKF_SPEC_MASK_TERM_ROWS): row r uses row r % this one's. A mask broadcast over the heads repeats
// every q_len rows, and over the rows too is one row; where the sequences' q_len differ
// (CallLayout::uniform_q_len), so do their packings, and every row reads its own. 1 without a mask
// (one pipeline).
uint32_t DecodeMaskTermRows(const CallLayout& call);

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
