#include "attention/key_band.h"

#include <algorithm>

namespace vkflash::attention {

KeyBand KeyBandOf(const AttentionParams& params) {
  return {params.window.left, params.causal ? 0 : params.window.right};
}

KeyRange RowKeys(const KeyBand& band, uint32_t row, uint32_t q_len, uint32_t kv_len) {
  const int64_t diagonal = int64_t(row) + int64_t(kv_len) - int64_t(q_len);
  const int64_t first = band.bounded_left() ? diagonal - band.left : 0;
  const int64_t end = band.bounded_right() ? diagonal + band.right + 1 : int64_t(kv_len);
  return {uint32_t(std::clamp<int64_t>(first, 0, kv_len)), uint32_t(std::clamp<int64_t>(end, 0, kv_len))};
}

uint64_t SequenceVisiblePairs(const KeyBand& band, uint32_t q_len, uint32_t kv_len) {
  if (!band.bounded_left() && !band.bounded_right()) return uint64_t(q_len) * kv_len;
  uint64_t pairs = 0;
  for (uint32_t row = 0; row < q_len; ++row) pairs += RowKeys(band, row, q_len, kv_len).count();
  return pairs;
}

}  // namespace vkflash::attention
