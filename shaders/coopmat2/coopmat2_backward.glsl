// Shared by the VK_NV_cooperative_matrix2 backward kernels. Both recompute P = exp2(scale S - LSE)
// in a coopMatPerElementNV callback that reads each query's LSE (base 2, from row_lse_log2 in
// common/backward_rows.glsl: +inf where P must be 0) from shared memory; tiles that the band's
// edges or kv_len cut also mask by the element's query and key. The dQ kernel holds S = Q K^T
// (rows are queries), the dK/dV kernel S^T = K Q^T (rows are keys).
// Needs: pc (AttentionPush), WINDOW_LEFT / WINDOW_RIGHT, lse_data / delta_data,
// common/attention_mask.glsl and common/score_mod.glsl. q_len and kv_len: the batch entry's sequence's (common/sequences.glsl).
#ifndef VKFLASH_COOPMAT2_BACKWARD_GLSL
#define VKFLASH_COOPMAT2_BACKWARD_GLSL

#include "common/constants.glsl"
#include "common/backward_rows.glsl"

// P of one element from its raw score s = Q.K (scaled and modified here: common/score_mod.glsl;
// where bias_tiles(), s comes scaled and with the bias added: coopmat2/bias_tiles.glsl): query and
// key are the sequence's, modifiers the head's score_head (ALiBi slope, mask row).
float p_of_score(const float s, const float lse_log2, const ScoreHead modifiers, const uint query, const uint key,
                 const uint q_len, const uint kv_len) {
  return pair_p(bias_tiles() ? s : s * pc.scale_log2, lse_log2, modifiers, query, key, q_len, kv_len);
}
float masked_p(const uint query, const uint key, const float s, const float lse_log2, const ScoreHead modifiers,
               const uint q_len, const uint kv_len) {
  return key_visible(query, key, q_len, kv_len) ? p_of_score(s, lse_log2, modifiers, query, key, q_len, kv_len) : 0.0;
}
// dS = P (dP - delta) d(score_mod)/ds of one element, the derivative from P and the row's LSE
// (base 2; the kernels do not keep the raw scores); in tiles that cross the mask, 0 for a masked
// pair whatever dP holds there (an inf in V or dO would make 0 x (dP - delta) NaN).
float ds_of(const float p, const float dp, const float delta, const float lse_log2, const ScoreHead modifiers,
            const uint query, const uint key, const uint q_len, const uint kv_len) {
  return p * (dp - delta) * score_mod_derivative_from_p(p, lse_log2, modifiers, query, key, q_len, kv_len);
}
float masked_ds(const uint query, const uint key, const float p, const float dp, const float delta,
                const float lse_log2, const ScoreHead modifiers, const uint q_len, const uint kv_len) {
  return key_visible(query, key, q_len, kv_len) ? ds_of(p, dp, delta, lse_log2, modifiers, query, key, q_len, kv_len)
                                                : 0.0;
}

#endif
