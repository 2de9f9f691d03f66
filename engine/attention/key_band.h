// The keys each query row sees: the band around the bottom-right aligned diagonal that causal
// masking and the sliding window cut (docs/design.md, "What is computed"). The shaders' side of
// the same rule is shaders/common/attention_mask.glsl.
#pragma once

#include <vkflash/vkflash.hpp>

#include <cstdint>

namespace vkflash::attention {

// Row i of a sequence of q_len rows over kv_len keys sees keys j with
//   i + kv_len - q_len - left <= j <= i + kv_len - q_len + right,   a side of -1: unbounded.
struct KeyBand {
  int32_t left = -1;
  int32_t right = -1;

  bool bounded_left() const { return left >= 0; }
  bool bounded_right() const { return right >= 0; }
};

// The call's band: its window, with the right side at 0 when causal.
KeyBand KeyBandOf(const AttentionParams& params);

// The keys row `row` sees: [first, end), empty where end <= first.
struct KeyRange {
  uint32_t first = 0;
  uint32_t end = 0;
  uint32_t count() const { return end > first ? end - first : 0; }
};
KeyRange RowKeys(const KeyBand& band, uint32_t row, uint32_t q_len, uint32_t kv_len);

// (row, key) pairs of one sequence: the sum of RowKeys(...).count() over its rows.
uint64_t SequenceVisiblePairs(const KeyBand& band, uint32_t q_len, uint32_t kv_len);

}  // namespace vkflash::attention
