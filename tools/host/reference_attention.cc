#include "reference_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vkflash::tools {

ReferenceForward ReferenceAttentionForward(const AttentionParams& params, const std::vector<float>& q,
                                           const std::vector<float>& k, const std::vector<float>& v) {
  const AttentionShape& s = params.shape;
  const uint64_t D = s.head_dim;
  const double scale = params.effective_scale();
  const int64_t shift = int64_t(s.kv_len) - int64_t(s.q_len);  // causal: row i sees j <= i + shift
  ReferenceForward out;
  out.o.assign(s.q_elements(), 0.0);
  out.lse.assign(s.lse_elements(), -std::numeric_limits<double>::infinity());
  std::vector<double> scores(s.kv_len);

  for (uint64_t b = 0; b < s.batch; ++b) {
    for (uint64_t h = 0; h < s.q_heads; ++h) {
      const uint64_t kvh = h / (s.q_heads / s.kv_heads);
      const float* k_head = k.data() + (b * s.kv_heads + kvh) * s.kv_len * D;
      const float* v_head = v.data() + (b * s.kv_heads + kvh) * s.kv_len * D;
      for (uint64_t i = 0; i < s.q_len; ++i) {
        const uint64_t row = (b * s.q_heads + h) * s.q_len + i;
        const float* q_row = q.data() + row * D;
        int64_t visible = int64_t(s.kv_len);
        if (params.causal) visible = std::clamp<int64_t>(int64_t(i) + shift + 1, 0, int64_t(s.kv_len));
        if (visible == 0) continue;  // O = 0, LSE = -inf

        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0.0;
          for (uint64_t d = 0; d < D; ++d) dot += double(q_row[d]) * double(k_head[j * D + d]);
          scores[j] = dot * scale;
          max_score = std::max(max_score, scores[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < visible; ++j) sum += (scores[j] = std::exp(scores[j] - max_score));
        double* o_row = out.o.data() + row * D;
        for (int64_t j = 0; j < visible; ++j) {
          const double p = scores[j] / sum;
          for (uint64_t d = 0; d < D; ++d) o_row[d] += p * double(v_head[j * D + d]);
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
  const int64_t shift = int64_t(s.kv_len) - int64_t(s.q_len);
  ReferenceBackward out;
  out.dq.assign(s.q_elements(), 0.0);
  out.dk.assign(s.kv_elements(), 0.0);
  out.dv.assign(s.kv_elements(), 0.0);
  std::vector<double> p(s.kv_len), dp(s.kv_len);

  for (uint64_t b = 0; b < s.batch; ++b) {
    for (uint64_t h = 0; h < s.q_heads; ++h) {
      const uint64_t kv_offset = (b * s.kv_heads + h / (s.q_heads / s.kv_heads)) * s.kv_len * D;
      for (uint64_t i = 0; i < s.q_len; ++i) {
        const uint64_t row = ((b * s.q_heads + h) * s.q_len + i) * D;
        int64_t visible = int64_t(s.kv_len);
        if (params.causal) visible = std::clamp<int64_t>(int64_t(i) + shift + 1, 0, int64_t(s.kv_len));
        if (visible == 0) continue;  // no key: O = 0 whatever Q, K, V are; zero gradients

        // P row (softmax of the scaled scores) and dP = dO V^T.
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0.0;
          for (uint64_t d = 0; d < D; ++d) dot += double(q[row + d]) * double(k[kv_offset + j * D + d]);
          p[j] = dot * scale;
          max_score = std::max(max_score, p[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < visible; ++j) sum += (p[j] = std::exp(p[j] - max_score));
        double p_dot_dp = 0.0;  // rowsum(P * dP) = rowsum(dO * O)
        for (int64_t j = 0; j < visible; ++j) {
          p[j] /= sum;
          double dot = 0.0;
          for (uint64_t d = 0; d < D; ++d) dot += double(d_o[row + d]) * double(v[kv_offset + j * D + d]);
          dp[j] = dot;
          p_dot_dp += p[j] * dp[j];
        }
        for (int64_t j = 0; j < visible; ++j) {
          const double ds = p[j] * (dp[j] - p_dot_dp);
          for (uint64_t d = 0; d < D; ++d) {
            out.dq[row + d] += scale * ds * double(k[kv_offset + j * D + d]);
            out.dk[kv_offset + j * D + d] += scale * ds * double(q[row + d]);
            out.dv[kv_offset + j * D + d] += p[j] * double(d_o[row + d]);
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
