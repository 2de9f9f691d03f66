// Float64 CPU reference attention: the ground truth tests and `vkflash check` compare with.
// Inputs are float arrays in the [B, H, N, D] layout of the numerical contract (already rounded
// to float16 where the GPU reads float16).
#pragma once

#include <vkflash/device_info.hpp>

#include <vector>

namespace vkflash::tools {

// Whether query row `row` sees key `key` (docs/design.md, "What is computed": causal and the
// window, bottom-right aligned with params.shape's lengths), written from the contract's formula and
// not from the engine's band code, so that the tests compare two derivations.
bool KeyVisible(const AttentionParams& params, uint64_t row, uint64_t key);

struct ReferenceForward {
  std::vector<double> o;    // [B, Hq, Nq, D]
  std::vector<double> lse;  // [B, Hq, Nq]; -inf for rows that see no key
};

ReferenceForward ReferenceAttentionForward(const AttentionParams& params, const std::vector<float>& q,
                                           const std::vector<float>& k, const std::vector<float>& v);

struct ReferenceBackward {
  std::vector<double> dq;      // like Q
  std::vector<double> dk, dv;  // like K, V (summed over the query heads of each GQA group)
};

// Gradients of sum(O * dO) with respect to Q, K and V, written out by hand in float64
// (softmax backward: dS = P * (dP - rowsum(P * dP)), dP = dO V^T).
ReferenceBackward ReferenceAttentionBackward(const AttentionParams& params, const std::vector<float>& q,
                                             const std::vector<float>& k, const std::vector<float>& v,
                                             const std::vector<float>& d_o);

// ||actual - expected|| / ||expected|| (Frobenius). NaN or inf in `actual` where `expected` is
// finite gives +inf; matching infinities (LSE = -inf rows) count as equal. An all-zero
// reference compares the absolute norm instead.
double RelativeError(const std::vector<float>& actual, const std::vector<double>& expected);

}  // namespace vkflash::tools
