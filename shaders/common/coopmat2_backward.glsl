// Shared by the VK_NV_cooperative_matrix2 backward kernels. Both recompute P = exp2(scale S - LSE)
// with the LSE and delta of each query row loaded as matrices whose other index repeats the row's
// value (a tensor layout with stride 0 along it): LSE in base 2, +inf past q_len (P = 0), delta 0
// there. Tiles that cross the causal diagonal or kv_len also need each element's query and key,
// which coopMatPerElementNV passes to the callbacks below. The dQ kernel holds S = Q K^T (rows are
// queries), the dK/dV kernel S^T = K Q^T (rows are keys).
// Needs: pc (AttentionPush), CAUSAL, and common/attention_mask.glsl.
#ifndef VKFLASH_COOPMAT2_BACKWARD_GLSL
#define VKFLASH_COOPMAT2_BACKWARD_GLSL

#define POS_INF uintBitsToFloat(0x7f800000u)
const float LOG2E = 1.4426950408889634;

// P of one element of a masked tile. A row whose LSE is -inf (it saw no key) has every key masked.
float masked_p(const uint query, const uint key, const float s, const float lse_log2) {
  return key_visible(query, key, pc.q_len, pc.kv_len) ? exp2(s * pc.scale_log2 - lse_log2) : 0.0;
}

// Callbacks: row / col are relative to the tile; q0 / k0 are the tile's first query / key.
float masked_p_of_s(const uint row, const uint col, const float s, const float lse_log2, const uint q0, const uint k0) {
  return masked_p(q0 + row, k0 + col, s, lse_log2);
}
float masked_p_of_st(const uint row, const uint col, const float st, const float lse_log2, const uint q0, const uint k0) {
  return masked_p(q0 + col, k0 + row, st, lse_log2);
}

#endif
