// Shared by the VK_NV_cooperative_matrix2 backward kernels. Both recompute P = exp2(scale S - LSE)
// in a coopMatPerElementNV callback that reads each query's LSE (base 2, from row_lse_log2 in
// common/backward_rows.glsl: +inf where P must be 0) from shared memory; tiles that the band's
// edges or kv_len cut also mask by the element's query and key. The dQ kernel holds S = Q K^T
// (rows are queries), the dK/dV kernel S^T = K Q^T (rows are keys).
// Needs: pc (AttentionPush), WINDOW_LEFT / WINDOW_RIGHT, lse_data / delta_data, and
// common/attention_mask.glsl. q_len and kv_len: the batch entry's sequence's (common/sequences.glsl).
#ifndef VKFLASH_COOPMAT2_BACKWARD_GLSL
#define VKFLASH_COOPMAT2_BACKWARD_GLSL

#include "common/constants.glsl"
#include "common/backward_rows.glsl"

// P of one element.
float p_of_score(const float s, const float lse_log2) { return exp2(s * pc.scale_log2 - lse_log2); }
float masked_p(const uint query, const uint key, const float s, const float lse_log2, const uint q_len,
               const uint kv_len) {
  return key_visible(query, key, q_len, kv_len) ? p_of_score(s, lse_log2) : 0.0;
}
// dS = P (dP - delta) of one element; in tiles that cross the mask, 0 for a masked pair whatever
// dP holds there (an inf in V or dO would make 0 x (dP - delta) NaN).
float ds_of(const float p, const float dp, const float delta) { return p * (dp - delta); }
float masked_ds(const uint query, const uint key, const float p, const float dp, const float delta, const uint q_len,
                const uint kv_len) {
  return key_visible(query, key, q_len, kv_len) ? ds_of(p, dp, delta) : 0.0;
}

#endif
