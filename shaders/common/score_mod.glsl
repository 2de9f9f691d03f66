// The one place where a score is modified (FlexAttention's score_mod), shared by every kernel
// family: the logit softcap, ALiBi and the mask / bias, then (common/attention_mask.glsl) the band's
// mask. And where
// a row's softmax starts: from nothing, or from its head's sink logit (gpt-oss), which joins the
// denominator with no value row. docs/design.md gives the contract in natural-log units; the
// kernels work in base 2 (t = scale * log2(e) * q.k, exp2), so here
//   softcap:  t <- C2 * tanh(t / C2), C2 = C * log2(e)   (the same curve, scaled)
//   ALiBi:    t <- t - slope * log2(e) * |i + Nk - Nq - j|
//   mask:     t <- t + bias[b, h, i, j] * log2(e)   (a boolean mask: t, or -inf where it blocks)
//   sink:     a logit sink * log2(e)
// A kernel built without a variant (its specialization constant at the default) pays nothing.
// A pair the mask blocks gets the score -inf, P = 0 and dS = 0, like one the band masks; unlike
// those, its K and V rows are still multiplied (by P = 0), so they must be finite, as in PyTorch's
// masked attention (docs/design.md).
// Include after common/attention_mask.glsl (diagonal_shift), with VKF_SCORE_MOD_BINDING_ALIBI and
// VKF_SCORE_MOD_BINDING_MASK (the kernel's VKF_*_BINDING_ALIBI / _MASK) and, in kernels that start
// a softmax, VKF_SCORE_MOD_BINDING_SINKS defined.
#ifndef VKFLASH_SCORE_MOD_GLSL
#define VKFLASH_SCORE_MOD_GLSL

#include "common/constants.glsl"

layout(constant_id = VKF_SPEC_SOFTCAP) const float SOFTCAP = 0.0;  // natural units; 0: none
layout(constant_id = VKF_SPEC_ALIBI) const uint ALIBI = VKF_ALIBI_NONE;
layout(constant_id = VKF_SPEC_SINKS) const bool SINKS = false;
layout(constant_id = VKF_SPEC_MASK) const uint MASK = VKF_MASK_NONE;
layout(constant_id = VKF_SPEC_MASK_DIMS) const uint MASK_DIMS = 15u;  // VKF_MASK_HAS_* bits

layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_ALIBI) readonly buffer alibi_block { float alibi_slopes[]; };
// Read as words whatever the element type: no 8- or 16-bit storage needed.
layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_MASK) readonly buffer mask_block { uint mask_words[]; };
#ifdef VKF_SCORE_MOD_BINDING_SINKS
layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_SINKS) readonly buffer sinks_block { float sink_logits[]; };
#endif

// Whether scores are modified at all: kernels skip the per-element pass where they are not.
bool scores_modified() { return SOFTCAP > 0.0 || ALIBI != VKF_ALIBI_NONE || MASK != VKF_MASK_NONE; }

// What the modifiers need of a (batch, query head), found once per workgroup or row: ALiBi's
// slope in base-2 units (0 without ALiBi), and the mask element of its row 0, key 0.
struct ScoreHead {
  float slope_log2;
  uint mask_base;
};

// The mask's element strides of a row and of a head (0 along the dimensions it broadcasts).
uint mask_row_stride() {
  if ((MASK_DIMS & VKF_MASK_HAS_ROWS) == 0) return 0;
  return (MASK_DIMS & VKF_MASK_HAS_KEYS) != 0 ? pc.mask_kv_len : 1u;
}
uint mask_head_elements() {
  return ((MASK_DIMS & VKF_MASK_HAS_ROWS) != 0 ? pc.mask_q_len : 1u) * ((MASK_DIMS & VKF_MASK_HAS_KEYS) != 0 ? pc.mask_kv_len : 1u);
}

ScoreHead score_head(uint batch, uint head) {
  ScoreHead h = ScoreHead(0.0, 0u);
  if (ALIBI != VKF_ALIBI_NONE) {
    h.slope_log2 = alibi_slopes[(ALIBI == VKF_ALIBI_PER_BATCH_HEAD ? batch * pc.q_heads : 0u) + head] * LOG2E;
  }
  if (MASK != VKF_MASK_NONE) {
    const uint heads = (MASK_DIMS & VKF_MASK_HAS_HEADS) != 0 ? pc.q_heads : 1u;
    h.mask_base = (((MASK_DIMS & VKF_MASK_HAS_BATCH) != 0 ? batch * heads : 0u) +
                   ((MASK_DIMS & VKF_MASK_HAS_HEADS) != 0 ? head : 0u)) * mask_head_elements();
  }
  return h;
}

// The mask's term of query row q_row and key `key` (of the sequence) in base-2 units: the bias
// times log2(e); a boolean mask's 0 where it allows the pair, -inf where it blocks it. Kernels
// also modify the scores of a last tile's padding rows and keys (past the sequence, discarded
// later): those read the mask's last row or key instead of past its end.
float mask_bias_log2(ScoreHead h, uint q_row, uint key) {
  q_row = min(q_row, pc.mask_q_len - 1);
  key = min(key, pc.mask_kv_len - 1);
  const uint at = h.mask_base + q_row * mask_row_stride() + ((MASK_DIMS & VKF_MASK_HAS_KEYS) != 0 ? key : 0u);
  if (MASK == VKF_MASK_FLOAT32) return uintBitsToFloat(mask_words[at]) * LOG2E;
  if (MASK == VKF_MASK_FLOAT16) return unpackHalf2x16(mask_words[at >> 1])[at & 1u] * LOG2E;
  if (MASK == VKF_MASK_BOOL) return ((mask_words[at >> 2] >> (8u * (at & 3u))) & 0xffu) != 0 ? 0.0 : NEG_INF;
  return 0.0;
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
// base-2 score t. h: score_head of the row's batch entry and head.
float score_mod(float t, ScoreHead h, uint q_row, uint key, uint q_len, uint kv_len) {
  if (SOFTCAP > 0.0) t = SOFTCAP * LOG2E * stable_tanh(t / (SOFTCAP * LOG2E));
  if (ALIBI != VKF_ALIBI_NONE) t -= alibi_bias_log2(h.slope_log2, q_row, key, q_len, kv_len);
  if (MASK != VKF_MASK_NONE) {  // a blocked pair is -inf whatever its score (no inf - inf = NaN)
    const float bias = mask_bias_log2(h, q_row, key);
    t = bias == NEG_INF ? NEG_INF : t + bias;
  }
  return t;
}

// d score_mod / dt at the unmodified score t: the backward multiplies dS by it (ALiBi's and the
// bias's terms are constant in t; the softcap's derivative is 1 - tanh^2).
float score_mod_derivative(float t) {
  if (!(SOFTCAP > 0.0)) return 1.0;
  const float th = stable_tanh(t / (SOFTCAP * LOG2E));
  return 1.0 - th * th;
}

// The same derivative from the pair's P instead of its raw score, for kernels that do not keep the
// raw scores: log2(P) + LSE is the modified score, which with ALiBi's and the bias's terms taken
// back is C2 * tanh(t / C2). Where P is 0 dS is 0 whatever the derivative, and it returns 0: rows
// that see no key (and padding rows) have an LSE of +inf there, and log2(0) + inf would be NaN.
float score_mod_derivative_from_p(float p, float lse_log2, ScoreHead h, uint q_row, uint key, uint q_len,
                                  uint kv_len) {
  if (!(SOFTCAP > 0.0)) return 1.0;
  if (p == 0.0) return 0.0;
  float capped = log2(p) + lse_log2;
  if (ALIBI != VKF_ALIBI_NONE) capped += alibi_bias_log2(h.slope_log2, q_row, key, q_len, kv_len);
  if (MASK == VKF_MASK_FLOAT32 || MASK == VKF_MASK_FLOAT16) capped -= mask_bias_log2(h, q_row, key);
  const float th = capped / (SOFTCAP * LOG2E);
  return max(1.0 - th * th, 0.0);
}

// The backward's P of a pair from its unmodified base-2 score t and its row's LSE (base 2, the
// sink included). Its dS is P * (dP - delta) * score_mod_derivative(t).
float pair_p(float t, float lse_log2, ScoreHead h, uint q_row, uint key, uint q_len, uint kv_len) {
  return exp2(score_mod(t, h, q_row, key, q_len, kv_len) - lse_log2);
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
