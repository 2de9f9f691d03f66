#include "mask_values.h"

#include <algorithm>
#include <limits>

#include "half.h"
#include "support/attention_case.h"

namespace vkflash::testing {

std::array<uint32_t, 4> ExpectedMaskShape(const AttentionParams& p) {
  uint32_t q_rows = p.shape.q_len, kv_rows = p.shape.kv_len;
  if (!p.cu_seqlens_q.empty() || !p.cu_seqlens_k.empty()) {
    uint32_t longest_q = 0, longest_kv = 0;
    for (const Sequence& seq : SequencesOf(p)) {
      longest_q = std::max(longest_q, seq.q_len);
      longest_kv = std::max(longest_kv, seq.kv_rows);
    }
    if (!p.cu_seqlens_q.empty()) q_rows = longest_q;
    if (!p.cu_seqlens_k.empty()) kv_rows = longest_kv;
  }
  return {p.shape.batch, p.shape.q_heads, q_rows, kv_rows};
}

uint64_t BroadcastMaskIndex(const AttentionParams& p, uint64_t b, uint64_t h, uint64_t i, uint64_t j) {
  const std::array<uint32_t, 4> full = ExpectedMaskShape(p);
  const AttentionMask& m = p.mask;
  const uint64_t heads = m.heads ? full[1] : 1, rows = m.rows ? full[2] : 1, keys = m.keys ? full[3] : 1;
  return (((m.batch ? b : 0) * heads + (m.heads ? h : 0)) * rows + (m.rows ? i : 0)) * keys + (m.keys ? j : 0);
}

std::vector<float> BlockSparseMaskValues(const AttentionParams& p, std::mt19937& rng, float closed_blocks,
                                         float blocked_pairs, float bias_sigma) {
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, bias_sigma);
  const std::array<uint32_t, 4> full = ExpectedMaskShape(p);
  const AttentionMask& m = p.mask;
  const uint32_t batch = m.batch ? full[0] : 1, heads = m.heads ? full[1] : 1, rows = m.rows ? full[2] : 1,
                 keys = m.keys ? full[3] : 1;
  std::vector<float> values(MaskElements(p));
  for (uint32_t b = 0; b < batch; ++b)
    for (uint32_t h = 0; h < heads; ++h) {
      const uint32_t key_blocks = (keys + 15) / 16;
      std::vector<bool> closed(uint64_t((rows + 15) / 16) * key_blocks);
      for (uint64_t i = 0; i < closed.size(); ++i) closed[i] = uniform(rng) < closed_blocks;
      for (uint32_t i = 0; i < rows; ++i)
        for (uint32_t j = 0; j < keys; ++j) {
          const bool blocked = closed[uint64_t(i / 16) * key_blocks + j / 16] || uniform(rng) < blocked_pairs;
          const float bias = m.type == MaskType::kFloat16 ? tools::RoundToHalf(normal(rng)) : normal(rng);
          values[BroadcastMaskIndex(p, b, h, i, j)] = m.type == MaskType::kBool
                                                          ? (blocked ? 0.0f : 1.0f)
                                                          : (blocked ? -std::numeric_limits<float>::infinity() : bias);
        }
    }
  return values;
}

}  // namespace vkflash::testing
