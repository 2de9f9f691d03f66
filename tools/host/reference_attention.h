// Float64 CPU reference attention: the ground truth tests and `vkflash check` compare with.
// Inputs are float arrays in the [B, H, N, D] layout of the numerical contract (already rounded
// to float16 where the GPU reads float16).
#pragma once

#include <vkflash/device_info.hpp>

#include <vector>

namespace vkflash::tools {

// Whether query row `row` sees key `key` < Nk (docs/design.md, "What is computed": causal and the
// window, bottom-right aligned with params.shape's lengths): key in VisibleKeys(params, row), whose
// range is written from the contract's formula and not from the engine's band code, so that the
// tests compare two derivations.
bool KeyVisible(const AttentionParams& params, uint64_t row, uint64_t key);
// The keys query row `row` sees, [first, end) (empty where end <= first).
struct VisibleKeyRange {
  uint64_t first = 0, end = 0;
};
VisibleKeyRange VisibleKeys(const AttentionParams& params, uint64_t row);

// Index of element (b, h, i, j) of [B, Hq, Nq, Nk] in params.mask's buffer: 0 along the dimensions
// it broadcasts.
uint64_t MaskIndex(const AttentionParams& params, uint64_t b, uint64_t h, uint64_t i, uint64_t j);

// The values the score variants read (the comment above AttentionParams): ALiBi slopes, [Hq] or
// [B, Hq] as params.alibi says, the sinks, [Hq] with params.sinks, and params.mask's elements.
// Softcap is params.softcap.
// The reference throws std::invalid_argument where the params need one of them and its size is
// wrong (a test's mistake, not a case to compare).
struct ReferenceVariants {
  std::vector<float> alibi_slopes;
  std::vector<float> sinks;
  // params.mask's elements (MaskElements), as floats: a bias (-inf blocks the pair), or for a
  // boolean mask 0 (blocks) and 1.
  std::vector<float> mask;
};

struct ReferenceForward {
  std::vector<double> o;    // [B, Hq, Nq, D]
  std::vector<double> lse;  // [B, Hq, Nq]; for rows that see no key: the sink, or -inf without sinks
};

ReferenceForward ReferenceAttentionForward(const AttentionParams& params, const std::vector<float>& q,
                                           const std::vector<float>& k, const std::vector<float>& v,
                                           const ReferenceVariants& variants = {});

struct ReferenceBackward {
  std::vector<double> dq;      // like Q
  std::vector<double> dk, dv;  // like K, V (summed over the query heads of each GQA group)
  std::vector<double> dsinks;  // [Hq] with params.sinks (summed over batch entries and rows), else empty
  // [Hq] with params.sinks: the sum of |P_sink * rowsum(dO * O)| that dsinks sums with signs. The
  // terms cancel, so rounding errors in the rows scale with this, not with dsinks.
  std::vector<double> dsinks_terms;
  // With an additive params.mask: the bias's gradient, the mask's shape (dS summed over the
  // dimensions it broadcasts), else empty.
  std::vector<double> dbias;
  // Like dbias: the sum of |dS| that each element sums with signs. A mask without the keys
  // dimension sums a row's dS, which cancel (to exactly 0 without sinks), so rounding errors scale
  // with this, not with dbias.
  std::vector<double> dbias_terms;
  // Float16 storage only (else empty), like dsinks and dbias: how far O's float16 storage may move
  // them. The backward sums rowsum(dO * O) over O as the forward stored it, and float16 may hold an
  // element of O below its normal range as 0 (docs/design.md, "Accuracy"): per row sum |dO * O|
  // over those elements, times P_sink (dsinks) or each key's P (dbias).
  std::vector<double> dsinks_storage_allowance, dbias_storage_allowance;
};

// Gradients of sum(O * dO) with respect to Q, K, V (and the sinks), written out by hand in
// float64 (softmax backward: dS = P * (dP - rowsum(P * dP)), dP = dO V^T; under a softcap dS is
// multiplied by 1 - tanh^2 of the capped score's argument; dsink = -sum P_sink * rowsum(P * dP)).
ReferenceBackward ReferenceAttentionBackward(const AttentionParams& params, const std::vector<float>& q,
                                             const std::vector<float>& k, const std::vector<float>& v,
                                             const std::vector<float>& d_o, const ReferenceVariants& variants = {});

// ||actual - expected|| / ||expected|| (Frobenius). NaN or inf in `actual` where `expected` is
// finite gives +inf; matching infinities (LSE = -inf rows) count as equal. An all-zero
// reference compares the absolute norm instead.
double RelativeError(const std::vector<float>& actual, const std::vector<double>& expected);

// RelativeError of an output stored as `storage` (docs/design.md, "Accuracy"). Float16 holds what
// lies below its normal range (|x| < 2^-14) only as a subnormal, and a device may flush those to
// 0: such an element may be off by its own size, so the norm of those elements of `expected` is
// taken off ||actual - expected|| before it is divided by ||expected||. Float32: RelativeError.
double StoredRelativeError(const std::vector<float>& actual, const std::vector<double>& expected, DataType storage);

}  // namespace vkflash::tools
