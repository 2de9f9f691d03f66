// What both gradient kernels need per query row: its LSE in base 2, turned into +inf where
// P must be 0 (rows past the sequence's q_len, and rows that see no key, whose LSE is -inf), so
// that P = exp2(S - lse) needs no other test; and its delta = rowsum(dO * O). row_index: the row's
// lse_index (common/sequences.glsl).
#ifndef VKFLASH_BACKWARD_ROWS_GLSL
#define VKFLASH_BACKWARD_ROWS_GLSL

#include "common/constants.glsl"

float row_lse_log2(uint row_index, uint q_row, uint q_len) {
  if (q_row >= q_len) return POS_INF;
  const float lse = lse_data[row_index];
  return lse == NEG_INF ? POS_INF : lse * LOG2E;
}

float row_delta(uint row_index, uint q_row, uint q_len) { return q_row < q_len ? delta_data[row_index] : 0.0; }

#endif
