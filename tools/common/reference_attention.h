// Float64 CPU reference attention: the ground truth tests and `vkflash check` compare with.
// Inputs are float arrays in the [B, H, N, D] layout of the numerical contract (already rounded
// to float16 where the GPU reads float16).
#pragma once

#include <vkflash/vkflash.hpp>

#include <vector>

namespace vkflash::tools {

struct ReferenceForward {
  std::vector<double> o;    // [B, Hq, Nq, D]
  std::vector<double> lse;  // [B, Hq, Nq]; -inf for rows that see no key
};

ReferenceForward ReferenceAttentionForward(const ForwardParams& params, const std::vector<float>& q,
                                           const std::vector<float>& k, const std::vector<float>& v);

// ||actual - expected|| / ||expected|| (Frobenius). NaN or inf in `actual` where `expected` is
// finite gives +inf; matching infinities (LSE = -inf rows) count as equal. An all-zero
// reference compares the absolute norm instead.
double RelativeError(const std::vector<float>& actual, const std::vector<double>& expected);

}  // namespace vkflash::tools
