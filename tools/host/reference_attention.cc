#include "reference_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

namespace vkflash::tools {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void RequireSize(const std::vector<float>& values, uint64_t expected, const char* what) {
  if (values.size() != expected) {
    throw std::invalid_argument(std::string("reference attention: ") + what + " holds " +
                                std::to_string(values.size()) + " values, the params need " + std::to_string(expected));
  }
}

void CheckVariants(const AttentionParams& params, const ReferenceVariants& variants) {
  const AttentionShape& s = params.shape;
  if (params.alibi == AlibiSlopes::kPerHead) RequireSize(variants.alibi_slopes, s.q_heads, "alibi_slopes");
  if (params.alibi == AlibiSlopes::kPerBatchHead)
    RequireSize(variants.alibi_slopes, uint64_t(s.batch) * s.q_heads, "alibi_slopes");
  if (params.sinks) RequireSize(variants.sinks, s.q_heads, "sinks");
  if (params.mask.type != MaskType::kNone) RequireSize(variants.mask, MaskElements(params), "mask");
}

}  // namespace

uint64_t MaskIndex(const AttentionParams& params, uint64_t b, uint64_t h, uint64_t i, uint64_t j) {
  const AttentionMask& m = params.mask;
  const AttentionShape& s = params.shape;
  const uint64_t keys = m.keys ? s.kv_len : 1, rows = m.rows ? s.q_len : 1, heads = m.heads ? s.q_heads : 1;
  return (((m.batch ? b : 0) * heads + (m.heads ? h : 0)) * rows + (m.rows ? i : 0)) * keys + (m.keys ? j : 0);
}

namespace {

// One query row's softmax over the keys it sees, with the score variants applied in the
// contract's order: scale, softcap, ALiBi, mask; the sink in the denominator.
struct RowSoftmax {
  std::vector<uint32_t> keys;  // the keys the row sees, in order
  std::vector<double> p;       // P of each of them
  std::vector<double> tanh;    // with a softcap: tanh(scale * q.k / softcap) of each (the backward's factor)
  double lse = -kInf;          // the sink where the row sees no key; -inf without sinks
  double p_sink = 0.0;         // exp(sink - lse); 0 without sinks
};

void ComputeRow(const AttentionParams& params, const ReferenceVariants& variants, const float* q_row,
                const float* k_head, uint64_t b, uint64_t h, uint64_t i, RowSoftmax* row) {
  const AttentionShape& s = params.shape;
  const uint64_t D = s.head_dim;
  const double scale = params.effective_scale(), softcap = params.softcap;
  const int64_t diagonal = int64_t(i) + int64_t(s.kv_len) - int64_t(s.q_len);
  double slope = 0.0;
  if (params.alibi == AlibiSlopes::kPerHead) slope = variants.alibi_slopes[h];
  if (params.alibi == AlibiSlopes::kPerBatchHead) slope = variants.alibi_slopes[b * s.q_heads + h];
  const double sink = params.sinks ? double(variants.sinks[h]) : -kInf;

  // The keys the row sees: in the band, and not blocked by the mask (-inf, or a boolean 0).
  row->keys.clear();
  for (uint32_t j = 0; j < s.kv_len; ++j) {
    if (!KeyVisible(params, i, j)) continue;
    if (params.mask.type != MaskType::kNone) {
      const float m = variants.mask[MaskIndex(params, b, h, i, j)];
      if (params.mask.type == MaskType::kBool ? m == 0.0f : m == -std::numeric_limits<float>::infinity()) continue;
    }
    row->keys.push_back(j);
  }
  row->p.resize(row->keys.size());
  row->tanh.resize(row->keys.size());
  if (row->keys.empty()) {  // O = 0; the sink alone is the denominator
    row->lse = sink;
    row->p_sink = params.sinks ? 1.0 : 0.0;
    return;
  }
  double max_score = sink;
  for (size_t n = 0; n < row->keys.size(); ++n) {
    double dot = 0.0;
    for (uint64_t d = 0; d < D; ++d) dot += double(q_row[d]) * double(k_head[row->keys[n] * D + d]);
    double score = dot * scale;
    if (softcap > 0.0) {
      row->tanh[n] = std::tanh(score / softcap);
      score = softcap * row->tanh[n];
    }
    if (params.alibi != AlibiSlopes::kNone) score -= slope * double(std::llabs(diagonal - int64_t(row->keys[n])));
    if (params.mask.additive()) {
      score += double(variants.mask[MaskIndex(params, b, h, i, row->keys[n])]);
    }
    row->p[n] = score;
    max_score = std::max(max_score, score);
  }
  double sum = params.sinks ? std::exp(sink - max_score) : 0.0;
  for (double& p : row->p) sum += (p = std::exp(p - max_score));
  for (double& p : row->p) p /= sum;
  row->lse = max_score + std::log(sum);
  row->p_sink = params.sinks ? std::exp(sink - max_score) / sum : 0.0;
}

}  // namespace

VisibleKeyRange VisibleKeys(const AttentionParams& params, uint64_t row) {
  const int64_t kv_len = params.shape.kv_len;
  const int64_t diagonal = int64_t(row) + kv_len - int64_t(params.shape.q_len);
  const int64_t left = params.window.left, right = params.causal ? 0 : params.window.right;
  const int64_t first = left >= 0 ? std::clamp<int64_t>(diagonal - left, 0, kv_len) : 0;
  const int64_t end = right >= 0 ? std::clamp<int64_t>(diagonal + right + 1, 0, kv_len) : kv_len;
  return {uint64_t(first), uint64_t(std::max(first, end))};
}

bool KeyVisible(const AttentionParams& params, uint64_t row, uint64_t key) {
  const VisibleKeyRange keys = VisibleKeys(params, row);
  return key >= keys.first && key < keys.end;
}

ReferenceForward ReferenceAttentionForward(const AttentionParams& params, const std::vector<float>& q,
                                           const std::vector<float>& k, const std::vector<float>& v,
                                           const ReferenceVariants& variants) {
  CheckVariants(params, variants);
  const AttentionShape& s = params.shape;
  const uint64_t D = s.head_dim;
  ReferenceForward out;
  out.o.assign(s.q_elements(), 0.0);
  out.lse.assign(s.lse_elements(), -kInf);
  RowSoftmax softmax;

  for (uint64_t b = 0; b < s.batch; ++b) {
    for (uint64_t h = 0; h < s.q_heads; ++h) {
      const uint64_t kvh = h / (s.q_heads / s.kv_heads);
      const float* k_head = k.data() + (b * s.kv_heads + kvh) * s.kv_len * D;
      const float* v_head = v.data() + (b * s.kv_heads + kvh) * s.kv_len * D;
      for (uint64_t i = 0; i < s.q_len; ++i) {
        const uint64_t row = (b * s.q_heads + h) * s.q_len + i;
        ComputeRow(params, variants, q.data() + row * D, k_head, b, h, i, &softmax);
        out.lse[row] = softmax.lse;
        double* o_row = out.o.data() + row * D;
        for (size_t n = 0; n < softmax.keys.size(); ++n) {
          for (uint64_t d = 0; d < D; ++d) o_row[d] += softmax.p[n] * double(v_head[softmax.keys[n] * D + d]);
        }
      }
    }
  }
  return out;
}

ReferenceBackward ReferenceAttentionBackward(const AttentionParams& params, const std::vector<float>& q,
                                             const std::vector<float>& k, const std::vector<float>& v,
                                             const std::vector<float>& d_o, const ReferenceVariants& variants) {
  CheckVariants(params, variants);
  const AttentionShape& s = params.shape;
  const uint64_t D = s.head_dim;
  const double scale = params.effective_scale();
  ReferenceBackward out;
  out.dq.assign(s.q_elements(), 0.0);
  out.dk.assign(s.kv_elements(), 0.0);
  out.dv.assign(s.kv_elements(), 0.0);
  if (params.sinks) out.dsinks.assign(s.q_heads, 0.0), out.dsinks_terms.assign(s.q_heads, 0.0);
  const bool additive_mask = params.mask.additive();
  if (additive_mask) out.dbias.assign(MaskElements(params), 0.0), out.dbias_terms.assign(MaskElements(params), 0.0);
  const bool float16 = params.dtype == DataType::kFloat16;
  if (float16) out.dsinks_storage_allowance.assign(out.dsinks.size(), 0.0);
  if (float16) out.dbias_storage_allowance.assign(out.dbias.size(), 0.0);
  const double smallest_normal = std::ldexp(1.0, -14);
  std::vector<double> dp(s.kv_len), o(D);
  RowSoftmax softmax;

  for (uint64_t b = 0; b < s.batch; ++b) {
    for (uint64_t h = 0; h < s.q_heads; ++h) {
      const uint64_t kv_offset = (b * s.kv_heads + h / (s.q_heads / s.kv_heads)) * s.kv_len * D;
      for (uint64_t i = 0; i < s.q_len; ++i) {
        const uint64_t row = ((b * s.q_heads + h) * s.q_len + i) * D;
        ComputeRow(params, variants, q.data() + row, k.data() + kv_offset, b, h, i, &softmax);
        // No key: O = 0 whatever Q, K, V are; zero gradients, and rowsum(dO * O) = 0 gives the sink none.
        if (softmax.keys.empty()) continue;

        // dP = dO V^T over the visible keys (the sink has no value row: its dP is 0).
        double p_dot_dp = 0.0;  // rowsum(P * dP) = rowsum(dO * O)
        for (size_t n = 0; n < softmax.keys.size(); ++n) {
          double dot = 0.0;
          for (uint64_t d = 0; d < D; ++d) dot += double(d_o[row + d]) * double(v[kv_offset + softmax.keys[n] * D + d]);
          dp[n] = dot;
          p_dot_dp += softmax.p[n] * dp[n];
        }
        // What float16 O's elements below its normal range may move rowsum(dO * O) by.
        double delta_allowance = 0.0;
        if (float16) {
          std::fill(o.begin(), o.end(), 0.0);
          for (size_t n = 0; n < softmax.keys.size(); ++n)
            for (uint64_t d = 0; d < D; ++d) o[d] += softmax.p[n] * double(v[kv_offset + softmax.keys[n] * D + d]);
          for (uint64_t d = 0; d < D; ++d)
            if (std::fabs(o[d]) < smallest_normal) delta_allowance += std::fabs(o[d] * double(d_o[row + d]));
        }
        if (params.sinks) {
          out.dsinks[h] -= softmax.p_sink * p_dot_dp;
          out.dsinks_terms[h] += std::fabs(softmax.p_sink * p_dot_dp);
          if (float16) out.dsinks_storage_allowance[h] += softmax.p_sink * delta_allowance;
        }
        for (size_t n = 0; n < softmax.keys.size(); ++n) {
          double ds = softmax.p[n] * (dp[n] - p_dot_dp);
          if (additive_mask) {  // the bias adds to the final score
            const uint64_t at = MaskIndex(params, b, h, i, softmax.keys[n]);
            out.dbias[at] += ds;
            out.dbias_terms[at] += std::fabs(ds);
            if (float16) out.dbias_storage_allowance[at] += softmax.p[n] * delta_allowance;
          }
          if (params.softcap > 0.0f) ds *= 1.0 - softmax.tanh[n] * softmax.tanh[n];  // d(C tanh(x / C)) / dx
          const uint64_t key_at = kv_offset + softmax.keys[n] * D;
          for (uint64_t d = 0; d < D; ++d) {
            out.dq[row + d] += scale * ds * double(k[key_at + d]);
            out.dk[key_at + d] += scale * ds * double(q[row + d]);
            out.dv[key_at + d] += softmax.p[n] * double(d_o[row + d]);
          }
        }
      }
    }
  }
  return out;
}

namespace {

// Over the elements both hold finite: the squared norms of actual - expected, of expected, and of
// expected's elements below float16's normal range (2^-14). Infinite where a size mismatch, a NaN
// in `actual` or an infinity not matched by the same one on the other side makes the error so.
struct ErrorSums {
  double diff = 0.0, norm = 0.0, below_normal = 0.0;
  bool infinite = false;
};
ErrorSums SumErrors(const std::vector<float>& actual, const std::vector<double>& expected) {
  ErrorSums sums;
  sums.infinite = actual.size() != expected.size();
  const double smallest_normal = std::ldexp(1.0, -14);
  for (size_t i = 0; i < actual.size() && !sums.infinite; ++i) {
    const double a = actual[i], e = expected[i];
    if (std::isnan(a) || ((std::isinf(e) || std::isinf(a)) && a != e)) sums.infinite = true;
    if (sums.infinite || std::isinf(e)) continue;
    sums.diff += (a - e) * (a - e);
    sums.norm += e * e;
    if (std::abs(e) < smallest_normal) sums.below_normal += e * e;
  }
  return sums;
}

}  // namespace

double RelativeError(const std::vector<float>& actual, const std::vector<double>& expected) {
  return StoredRelativeError(actual, expected, DataType::kFloat32);
}

double StoredRelativeError(const std::vector<float>& actual, const std::vector<double>& expected, DataType storage) {
  const ErrorSums sums = SumErrors(actual, expected);
  if (sums.infinite) return std::numeric_limits<double>::infinity();
  double diff = std::sqrt(sums.diff);
  if (storage == DataType::kFloat16) diff = std::max(0.0, diff - std::sqrt(sums.below_normal));
  return sums.norm > 0.0 ? diff / std::sqrt(sums.norm) : diff;
}

}  // namespace vkflash::tools
