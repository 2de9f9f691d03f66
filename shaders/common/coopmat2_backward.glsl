// Per-element steps of the VK_NV_cooperative_matrix2 backward kernels, as coopMatPerElementNV
// callbacks. Both gradient kernels recompute P from the forward's LSE; the dQ kernel holds
// S = Q K^T (rows are queries), the dK/dV kernel S^T = K Q^T (rows are keys), so each step comes
// in both orientations around one function of (query, key).
// Needs: pc (AttentionPush), lse_data, delta_data, CAUSAL, and common/attention_mask.glsl.
#ifndef VKFLASH_COOPMAT2_BACKWARD_GLSL
#define VKFLASH_COOPMAT2_BACKWARD_GLSL

#define POS_INF uintBitsToFloat(0x7f800000u)
const float LOG2E = 1.4426950408889634;

// P = exp2(scale S - LSE) of one element; 0 for masked keys, query rows past q_len and rows that
// saw no key in the forward (LSE = -inf). head_row: row index of query 0 of this head.
float recompute_p(const uint query, const uint key, const float s, const uint head_row, const bool masked_tile) {
  if (query >= pc.q_len) return 0.0;
  const float lse = lse_data[head_row + query];
  if (lse == NEG_INF || (masked_tile && !key_visible(query, key, pc.q_len, pc.kv_len))) return 0.0;
  return exp2(s * pc.scale_log2 - lse * LOG2E);
}

// dS = P (dP - delta) of one element.
float softmax_grad(const uint query, const float dp, const float p, const uint head_row) {
  return query < pc.q_len ? p * (dp - delta_data[head_row + query]) : 0.0;
}

// Callbacks: row / col are relative to the tile; q0 / k0 are the tile's first query / key.
float p_of_s(const uint row, const uint col, const float s, const uint q0, const uint k0, const uint head_row,
             const uint masked_tile) {
  return recompute_p(q0 + row, k0 + col, s, head_row, masked_tile != 0);
}
float p_of_st(const uint row, const uint col, const float st, const uint q0, const uint k0, const uint head_row,
              const uint masked_tile) {
  return recompute_p(q0 + col, k0 + row, st, head_row, masked_tile != 0);
}
float ds_of_dp(const uint row, const uint col, const float dp, const float p, const uint q0, const uint head_row) {
  return softmax_grad(q0 + row, dp, p, head_row);
}
float dst_of_dpt(const uint row, const uint col, const float dpt, const float pt, const uint q0, const uint head_row) {
  return softmax_grad(q0 + col, dpt, pt, head_row);
}

#endif
