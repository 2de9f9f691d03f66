// The one place where a score is modified (FlexAttention's score_mod), shared by every kernel
// family: the logit softcap and ALiBi, then (common/attention_mask.glsl) the band's mask. And where
// a row's softmax starts: from nothing, or from its head's sink logit (gpt-oss), which joins the
// denominator with no value row. docs/design.md gives the contract in natural-log units; the
// kernels work in base 2 (t = scale * log2(e) * q.k, exp2), so here
//   softcap:  t <- C2 * tanh(t / C2), C2 = C * log2(e)   (the same curve, scaled)
//   ALiBi:    t <- t - slope * log2(e) * |i + Nk - Nq - j|
//   sink:     a logit sink * log2(e)
// A kernel built without a variant (its specialization constant at the default) pays nothing.
// Include after common/attention_mask.glsl (diagonal_shift), with
// VKF_SCORE_MOD_BINDING_ALIBI (the kernel's VKF_*_BINDING_ALIBI) and, in kernels that start a
// softmax, VKF_SCORE_MOD_BINDING_SINKS defined.
#ifndef VKFLASH_SCORE_MOD_GLSL
#define VKFLASH_SCORE_MOD_GLSL

#include "common/constants.glsl"

layout(constant_id = VKF_SPEC_SOFTCAP) const float SOFTCAP = 0.0;  // natural units; 0: none
layout(constant_id = VKF_SPEC_ALIBI) const uint ALIBI = VKF_ALIBI_NONE;
layout(constant_id = VKF_SPEC_SINKS) const bool SINKS = false;

layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_ALIBI) readonly buffer alibi_block { float alibi_slopes[]; };
#ifdef VKF_SCORE_MOD_BINDING_SINKS
layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_SINKS) readonly buffer sinks_block { float sink_logits[]; };
#endif

// Whether scores are modified at all: kernels skip the per-element pass where they are not.
bool scores_modified() { return SOFTCAP > 0.0 || ALIBI != VKF_ALIBI_NONE; }

// ALiBi's slope for (batch, head) in base-2 units; 0 without ALiBi.
float alibi_slope_log2(uint batch, uint head) {
  if (ALIBI == VKF_ALIBI_NONE) return 0.0;
  return alibi_slopes[(ALIBI == VKF_ALIBI_PER_BATCH_HEAD ? batch * pc.q_heads : 0u) + head] * LOG2E;
}

// ALiBi's term of query row q_row and key `key` (base 2): slope times the distance from the
// bottom-right aligned diagonal.
float alibi_bias_log2(float slope_log2, uint q_row, uint key, uint q_len, uint kv_len) {
  return slope_log2 * float(abs(int(key) - int(q_row) - diagonal_shift(q_len, kv_len)));
}

// tanh without the overflow of (e^2x - 1) / (e^2x + 1): finite for every finite x, +-1 at +-inf,
// NaN for NaN.
float stable_tanh(float x) {
  const float e = exp2(-2.0 * LOG2E * abs(x));
  return (x < 0.0 ? -1.0 : 1.0) * (1.0 - e) / (1.0 + e);
}

// The modified score of query row q_row and key `key` of a sequence of q_len x kv_len, from its
// base-2 score t. slope_log2: alibi_slope_log2 of the row's head.
float score_mod(float t, float slope_log2, uint q_row, uint key, uint q_len, uint kv_len) {
  if (SOFTCAP > 0.0) t = SOFTCAP * LOG2E * stable_tanh(t / (SOFTCAP * LOG2E));
  if (ALIBI != VKF_ALIBI_NONE) t -= alibi_bias_log2(slope_log2, q_row, key, q_len, kv_len);
  return t;
}

// d score_mod / dt at the unmodified score t: the backward multiplies dS by it (ALiBi's term is
// constant in t; the softcap's derivative is 1 - tanh^2).
float score_mod_derivative(float t) {
  if (!(SOFTCAP > 0.0)) return 1.0;
  const float th = stable_tanh(t / (SOFTCAP * LOG2E));
  return 1.0 - th * th;
}

// The same derivative from the pair's P instead of its raw score, for kernels that do not keep the
// raw scores: log2(P) + LSE is the modified score, which with ALiBi's term added back is
// C2 * tanh(t / C2). Where P is 0 dS is 0 whatever the derivative, and it returns 0: rows that see
// no key (and padding rows) have an LSE of +inf there, and log2(0) + inf would be NaN.
float score_mod_derivative_from_p(float p, float lse_log2, float slope_log2, uint q_row, uint key, uint q_len,
                                  uint kv_len) {
  if (!(SOFTCAP > 0.0)) return 1.0;
  if (p == 0.0) return 0.0;
  float capped = log2(p) + lse_log2;
  if (ALIBI != VKF_ALIBI_NONE) capped += alibi_bias_log2(slope_log2, q_row, key, q_len, kv_len);
  const float th = capped / (SOFTCAP * LOG2E);
  return max(1.0 - th * th, 0.0);
}

// The backward's P of a pair from its unmodified base-2 score t and its row's LSE (base 2, the
// sink included). Its dS is P * (dP - delta) * score_mod_derivative(t).
float pair_p(float t, float lse_log2, float slope_log2, uint q_row, uint key, uint q_len, uint kv_len) {
  return exp2(score_mod(t, slope_log2, q_row, key, q_len, kv_len) - lse_log2);
}

#ifdef VKF_SCORE_MOD_BINDING_SINKS
// Where a row's online softmax starts: running max m0 and sum l0 (relative to m0). With sinks,
// the sink is the row's first score, with a zero value row; its max is held at or above `floor`
// (the kernel's starting max, finite in most kernels, so that m_old - m_new never becomes NaN);
// a sink of -inf weighs nothing. Without sinks: floor and 0.
void softmax_start(uint head, float floor, out float m0, out float l0) {
  m0 = floor;
  l0 = 0.0;
  if (!SINKS) return;
  const float sink = sink_logits[head] * LOG2E;
  m0 = max(sink, floor);
  l0 = sink == NEG_INF ? 0.0 : exp2(sink - m0);
}
#endif

#endif
