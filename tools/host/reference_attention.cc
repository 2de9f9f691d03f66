#include "reference_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vkflash::tools {
namespace {

// The keys row i sees, in order.
void VisibleKeys(const AttentionParams& params, uint64_t i, std::vector<uint32_t>* keys) {
  keys->clear();
  for (uint32_t j = 0; j < params.shape.kv_len; ++j)
    if (KeyVisible(params, i, j)) keys->push_back(j);
}

}  // namespace

bool KeyVisible(const AttentionParams& params, uint64_t row, uint64_t key) {
  const int64_t diagonal = int64_t(row) + int64_t(params.shape.kv_len) - int64_t(params.shape.q_len);
  const int64_t left = params.window.left, right = params.causal ? 0 : params.window.right;
  if (left >= 0 && int64_t(key) < diagonal - left) return false;
  return right < 0 || int64_t(key) <= diagonal + right;
}

ReferenceForward ReferenceAttentionForward(const AttentionParams& params, const std::vector<float>& q,
                                           const std::vector<float>& k, const std::vector<float>& v) {
  const AttentionShape& s = params.shape;
  const uint64_t D = s.head_dim;
  const double scale = params.effective_scale();
  ReferenceForward out;
  out.o.assign(s.q_elements(), 0.0);
  out.lse.assign(s.lse_elements(), -std::numeric_limits<double>::infinity());
  std::vector<double> scores(s.kv_len);
  std::vector<uint32_t> keys;

  for (uint64_t b = 0; b < s.batch; ++b) {
    for (uint64_t h = 0; h < s.q_heads; ++h) {
      const uint64_t kvh = h / (s.q_heads / s.kv_heads);
      const float* k_head = k.data() + (b * s.kv_heads + kvh) * s.kv_len * D;
      const float* v_head = v.data() + (b * s.kv_heads + kvh) * s.kv_len * D;
      for (uint64_t i = 0; i < s.q_len; ++i) {
        const uint64_t row = (b * s.q_heads + h) * s.q_len + i;
        const float* q_row = q.data() + row * D;
        VisibleKeys(params, i, &keys);
        if (keys.empty()) continue;  // O = 0, LSE = -inf

        double max_score = -std::numeric_limits<double>::infinity();
        for (size_t n = 0; n < keys.size(); ++n) {
          double dot = 0.0;
          for (uint64_t d = 0; d < D; ++d) dot += double(q_row[d]) * double(k_head[keys[n] * D + d]);
          scores[n] = dot * scale;
          max_score = std::max(max_score, scores[n]);
        }
        double sum = 0.0;
        for (size_t n = 0; n < keys.size(); ++n) sum += (scores[n] = std::exp(scores[n] - max_score));
        double* o_row = out.o.data() + row * D;
        for (size_t n = 0; n < keys.size(); ++n) {
          const double p = scores[n] / sum;
          for (uint64_t d = 0; d < D; ++d) o_row[d] += p * double(v_head[keys[n] * D + d]);
        }
        out.lse[row] = max_score + std::log(sum);
      }
    }
  }
  return out;
}

ReferenceBackward ReferenceAttentionBackward(const AttentionParams& params, const std::vector<float>& q,
                                             const std::vector<float>& k, const std::vector<float>& v,
                                             const std::vector<float>& d_o) {
  const AttentionShape& s = params.shape;
  const uint64_t D = s.head_dim;
  const double scale = params.effective_scale();
  ReferenceBackward out;
  out.dq.assign(s.q_elements(), 0.0);
  out.dk.assign(s.kv_elements(), 0.0);
  out.dv.assign(s.kv_elements(), 0.0);
  std::vector<double> p(s.kv_len), dp(s.kv_len);
  std::vector<uint32_t> keys;

  for (uint64_t b = 0; b < s.batch; ++b) {
    for (uint64_t h = 0; h < s.q_heads; ++h) {
      const uint64_t kv_offset = (b * s.kv_heads + h / (s.q_heads / s.kv_heads)) * s.kv_len * D;
      for (uint64_t i = 0; i < s.q_len; ++i) {
        const uint64_t row = ((b * s.q_heads + h) * s.q_len + i) * D;
        VisibleKeys(params, i, &keys);
        if (keys.empty()) continue;  // no key: O = 0 whatever Q, K, V are; zero gradients

        // P row (softmax of the scaled scores) and dP = dO V^T, over the visible keys.
        double max_score = -std::numeric_limits<double>::infinity();
        for (size_t n = 0; n < keys.size(); ++n) {
          double dot = 0.0;
          for (uint64_t d = 0; d < D; ++d) dot += double(q[row + d]) * double(k[kv_offset + keys[n] * D + d]);
          p[n] = dot * scale;
          max_score = std::max(max_score, p[n]);
        }
        double sum = 0.0;
        for (size_t n = 0; n < keys.size(); ++n) sum += (p[n] = std::exp(p[n] - max_score));
        double p_dot_dp = 0.0;  // rowsum(P * dP) = rowsum(dO * O)
        for (size_t n = 0; n < keys.size(); ++n) {
          p[n] /= sum;
          double dot = 0.0;
          for (uint64_t d = 0; d < D; ++d) dot += double(d_o[row + d]) * double(v[kv_offset + keys[n] * D + d]);
          dp[n] = dot;
          p_dot_dp += p[n] * dp[n];
        }
        for (size_t n = 0; n < keys.size(); ++n) {
          const double ds = p[n] * (dp[n] - p_dot_dp);
          const uint64_t key_at = kv_offset + keys[n] * D;
          for (uint64_t d = 0; d < D; ++d) {
            out.dq[row + d] += scale * ds * double(k[key_at + d]);
            out.dk[key_at + d] += scale * ds * double(q[row + d]);
            out.dv[key_at + d] += p[n] * double(d_o[row + d]);
          }
        }
      }
    }
  }
  return out;
}

double RelativeError(const std::vector<float>& actual, const std::vector<double>& expected) {
  if (actual.size() != expected.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (std::isnan(a)) return std::numeric_limits<double>::infinity();
    if (std::isinf(e) || std::isinf(a)) {
      if (a != e) return std::numeric_limits<double>::infinity();
      continue;
    }
    diff += (a - e) * (a - e);
    norm += e * e;
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace vkflash::tools
