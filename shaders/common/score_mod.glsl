// The one place where a score is modified (FlexAttention's score_mod), shared by every kernel
// family: the logit softcap, ALiBi and the mask / bias, then (common/attention_mask.glsl) the band's
// mask. And where a row's softmax starts and ends: from nothing, or with its head's sink logit
// (gpt-oss), which joins the denominator with no value row; the tensor-core forwards' reference
// for P. docs/design.md gives the contract in natural-log units; the kernels work in base 2 (t =
// scale * log2(e) * q.k, exp2), so here
//   softcap:  t <- C2 * tanh(t / C2), C2 = C * log2(e)   (the same curve, scaled)
//   ALiBi:    t <- t - slope * log2(e) * |i + Nk - Nq - j|
//   mask:     t <- t + bias[b, h, i, j] * log2(e)   (a boolean mask: t, or -inf where it blocks)
//   sink:     a logit sink * log2(e)
// A kernel built without a variant (its specialization constant at the default) pays nothing.
// A pair the mask blocks gets the score -inf, P = 0 and dS = 0, like one the band masks; unlike
// those, its K and V rows are still multiplied (by P = 0), so they must be finite, as in PyTorch's
// masked attention (docs/design.md).
// Include after common/attention_mask.glsl (diagonal_shift), with VKF_SCORE_MOD_BINDING_ALIBI,
// VKF_SCORE_MOD_BINDING_MASK and VKF_SCORE_MOD_BINDING_MASK_TILES (the kernel's
// VKF_*_BINDING_ALIBI / _MASK / _MASK_TILES) and, in kernels that start or end a softmax,
// VKF_SCORE_MOD_BINDING_SINKS defined.
#ifndef VKFLASH_SCORE_MOD_GLSL
#define VKFLASH_SCORE_MOD_GLSL

#include "common/constants.glsl"

layout(constant_id = VKF_SPEC_SOFTCAP) const float SOFTCAP = 0.0;  // natural units; 0: none
layout(constant_id = VKF_SPEC_ALIBI) const uint ALIBI = VKF_ALIBI_NONE;
layout(constant_id = VKF_SPEC_SINKS) const bool SINKS = false;
#define VKF_MASK_ELEMENTS_BINDING VKF_SCORE_MOD_BINDING_MASK
#include "common/mask_elements.glsl"

layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_ALIBI) readonly buffer alibi_block { float alibi_slopes[]; };
// The mask's block summary (common/shader_interface.h), in the workspace.
layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_MASK_TILES) readonly buffer mask_tiles_block {
  uint mask_tile_bits[];
};
#ifdef VKF_SCORE_MOD_BINDING_SINKS
layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_SINKS) readonly buffer sinks_block { float sink_logits[]; };
#endif

// Whether the mask is a float32 or float16 bias (added to the scores), not a boolean one.
bool float_mask() { return MASK == VKF_MASK_FLOAT32 || MASK == VKF_MASK_FLOAT16; }

// Whether the kernel adds a float bias to its scores as whole matrices (coopmat2/bias_tiles.glsl),
// so that score_mod leaves the mask's term out: in kernels that define VKF_SCORE_MOD_BIAS_TILES,
// for a float mask alone or with sinks. Not with a softcap, whose curve applies before the bias,
// nor with ALiBi (its per-element term would land before the bias in the forward, after it in the
// backward's recomputed P). A function: a float comparison cannot initialize a specialization
// constant.
bool bias_tiles() {
#ifdef VKF_SCORE_MOD_BIAS_TILES
  return float_mask() && !(SOFTCAP > 0.0) && ALIBI == VKF_ALIBI_NONE;
#else
  return false;
#endif
}

// Whether scores are modified per element: kernels skip that pass where they are not.
bool scores_modified() {
  return SOFTCAP > 0.0 || ALIBI != VKF_ALIBI_NONE || (MASK != VKF_MASK_NONE && !bias_tiles());
}

// What the modifiers need of a (batch, query head), found once per workgroup or row: ALiBi's
// slope in base-2 units (0 without ALiBi) and the mask element of its row 0, key 0. Passed to
// the coopmat2 kernels' per-element callbacks: keep it small.
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

// The mask's head (its batch x heads, C order) that query head `head` of batch entry `batch` reads.
uint mask_head_of(uint batch, uint head) {
  const uint heads = (MASK_DIMS & VKF_MASK_HAS_HEADS) != 0 ? pc.q_heads : 1u;
  return ((MASK_DIMS & VKF_MASK_HAS_BATCH) != 0 ? batch * heads : 0u) + ((MASK_DIMS & VKF_MASK_HAS_HEADS) != 0 ? head : 0u);
}

ScoreHead score_head(uint batch, uint head) {
  ScoreHead h = ScoreHead(0.0, 0u);
  if (ALIBI != VKF_ALIBI_NONE) {
    h.slope_log2 = alibi_slopes[(ALIBI == VKF_ALIBI_PER_BATCH_HEAD ? batch * pc.q_heads : 0u) + head] * LOG2E;
  }
  if (MASK != VKF_MASK_NONE) h.mask_base = mask_head_of(batch, head) * mask_head_elements();
  return h;
}

// The first uint of the block summary of the mask head that (batch, head) reads: the tile skips
// below take it (0 without a mask).
uint mask_summary_base(uint batch, uint head) {
  if (MASK == VKF_MASK_NONE) return 0u;
  return mask_head_of(batch, head) * mask_tile_rows(mask_stored_rows(pc.mask_q_len)) *
         mask_tile_words(mask_stored_keys(pc.mask_kv_len));
}

// The mask's term of query row q_row and key `key` (of the sequence) in base-2 units: the bias
// times log2(e); a boolean mask's 0 where it allows the pair, -inf where it blocks it. Kernels
// also modify the scores of a last tile's padding rows and keys (past the sequence, discarded
// later): those read the mask's last row or key instead of past its end.
float mask_bias_log2(ScoreHead h, uint q_row, uint key) {
  q_row = min(q_row, pc.mask_q_len - 1);
  key = min(key, pc.mask_kv_len - 1);
  const uint at = h.mask_base + q_row * mask_row_stride() + ((MASK_DIMS & VKF_MASK_HAS_KEYS) != 0 ? key : 0u);
  return mask_value(at) * LOG2E;
}

// Tiles the mask closes: the kernels skip them, as FlexAttention skips the blocks its block mask
// closes. From the block summary (common/mask_elements.glsl), so conservative: a block that a tile
// only overlaps counts whole. Rows and keys past the mask's own read its last (as mask_bias_log2
// does); an empty range is never closed.

// The summary's blocks that rows [q_begin, q_end) x keys [kv_begin, kv_end) overlap, inclusive.
struct MaskBlocks {
  uint row0, row1, key0, key1;
};
MaskBlocks mask_blocks_of(uint q_begin, uint q_end, uint kv_begin, uint kv_end) {
  MaskBlocks b = MaskBlocks(0u, 0u, 0u, 0u);
  if ((MASK_DIMS & VKF_MASK_HAS_ROWS) != 0) {
    b.row0 = min(q_begin, pc.mask_q_len - 1) / VKF_MASK_TILE_ROWS;
    b.row1 = (min(q_end, pc.mask_q_len) - 1) / VKF_MASK_TILE_ROWS;
  }
  if ((MASK_DIMS & VKF_MASK_HAS_KEYS) != 0) {
    b.key0 = min(kv_begin, pc.mask_kv_len - 1) / VKF_MASK_TILE_KEYS;
    b.key1 = (min(kv_end, pc.mask_kv_len) - 1) / VKF_MASK_TILE_KEYS;
  }
  return b;
}

// Of the group of 32 blocks `group` (blocks 32 group ..), the bits of blocks [first, last].
uint block_bits(uint first, uint last, uint group) {
  const uint low = group == first / 32 ? first % 32 : 0u, high = group == last / 32 ? last % 32 : 31u;
  return (0xffffffffu << low) & (0xffffffffu >> (31u - high));
}

// Of summary word `word` (key blocks 32 word ..), the bits of blocks [b.key0, b.key1].
uint mask_key_bits(MaskBlocks b, uint word) { return block_bits(b.key0, b.key1, word); }

// Bits of summary word `word` open in some row block of [b.row0, b.row1].
uint mask_open_key_blocks(uint summary, MaskBlocks b, uint word) {
  const uint words = mask_tile_words(mask_stored_keys(pc.mask_kv_len));
  uint open = 0;
  for (uint row_block = b.row0; row_block <= b.row1; ++row_block) {
    open |= mask_tile_bits[summary + row_block * words + word];
  }
  return open;
}

// True if the mask closes every pair of the tile, read from the summary at every call (the dBias
// kernel's steps, the decode kernels' heads of a mask with a heads dimension). Loops use the walks
// below, which read each summary word once, or (the coopmat2 forward and dK/dV kernels) find their
// loop's closed tiles up front (common/closed_tiles.glsl, which falls back to this past its first
// 1024 tiles).
bool mask_closes_tile(uint summary, uint q_begin, uint q_end, uint kv_begin, uint kv_end) {
  if (MASK == VKF_MASK_NONE || q_end <= q_begin || kv_end <= kv_begin) return false;
  const MaskBlocks b = mask_blocks_of(q_begin, q_end, kv_begin, kv_end);
  uint open = 0;
  for (uint word = b.key0 / 32; word <= b.key1 / 32; ++word) {
    open |= mask_open_key_blocks(summary, b, word) & mask_key_bits(b, word);
  }
  return open == 0;
}

// A loop's walk over tiles of one mask head, keeping the summary bits it last read: `at` is the
// group of 32 blocks they describe (~0u: none yet), `open` one bit per block of the group.
struct MaskWalk {
  uint at;
  uint open;
};
MaskWalk mask_walk() { return MaskWalk(0xffffffffu, 0u); }

// mask_closes_tile for a loop over key tiles whose rows stay [q_begin, q_end): `walk` caches, per
// 32 key blocks (512 keys), which of them some of the rows leaves open. Start each loop (and head)
// with mask_walk().
bool mask_closes_keys(inout MaskWalk walk, uint summary, uint q_begin, uint q_end, uint kv_begin, uint kv_end) {
  if (MASK == VKF_MASK_NONE || q_end <= q_begin || kv_end <= kv_begin) return false;
  const MaskBlocks b = mask_blocks_of(q_begin, q_end, kv_begin, kv_end);
  for (uint word = b.key0 / 32; word <= b.key1 / 32; ++word) {
    if (word != walk.at) walk = MaskWalk(word, mask_open_key_blocks(summary, b, word));
    if ((walk.open & mask_key_bits(b, word)) != 0) return false;
  }
  return true;
}

// mask_closes_tile for a loop over query tiles whose keys stay [kv_begin, kv_end) (the dK/dV
// kernels): `walk` caches, per 32 row blocks (512 rows), which of them leaves one of the keys open.
// Start each loop (and head) with mask_walk().
bool mask_closes_rows(inout MaskWalk walk, uint summary, uint q_begin, uint q_end, uint kv_begin, uint kv_end) {
  if (MASK == VKF_MASK_NONE || q_end <= q_begin || kv_end <= kv_begin) return false;
  const MaskBlocks b = mask_blocks_of(q_begin, q_end, kv_begin, kv_end);
  const uint words = mask_tile_words(mask_stored_keys(pc.mask_kv_len));
  const uint row_blocks = mask_tile_rows(mask_stored_rows(pc.mask_q_len));
  for (uint group = b.row0 / 32; group <= b.row1 / 32; ++group) {
    if (group != walk.at) {
      walk = MaskWalk(group, 0u);
      for (uint r = 0; r < 32 && group * 32 + r < row_blocks; ++r) {
        uint open = 0;
        for (uint word = b.key0 / 32; word <= b.key1 / 32; ++word) {
          open |= mask_tile_bits[summary + (group * 32 + r) * words + word] & mask_key_bits(b, word);
        }
        if (open != 0) walk.open |= 1u << r;
      }
    }
    if ((walk.open & block_bits(b.row0, b.row1, group)) != 0) return false;
  }
  return true;
}

// mask_closes_keys for every query head [head0, head0 + heads) of batch entry `batch`: the decode
// kernels pack a GQA group's heads into one tile. A mask with a heads dimension reads the summary
// at every call (one walk per head would cost registers); without one, the walk caches.
bool mask_closes_heads_keys(inout MaskWalk walk, uint batch, uint head0, uint heads, uint q_begin, uint q_end,
                            uint kv_begin, uint kv_end) {
  if (MASK == VKF_MASK_NONE) return false;
  if ((MASK_DIMS & VKF_MASK_HAS_HEADS) == 0) {
    return mask_closes_keys(walk, mask_summary_base(batch, head0), q_begin, q_end, kv_begin, kv_end);
  }
  for (uint h = 0; h < heads; ++h) {
    if (!mask_closes_tile(mask_summary_base(batch, head0 + h), q_begin, q_end, kv_begin, kv_end)) return false;
  }
  return true;
}

// float(i) for -2^22 <= i < 2^22, exactly, without an integer-to-float conversion: i added to the
// bits of 1.5 * 2^23 (whose float steps by 1 there), then 1.5 * 2^23 taken off. An integer add and a
// float subtraction in place of the conversion save the coopmat2 forward with ALiBi 4-5% of its
// time at D = 64 on an H200 (docs/tuning-log.md, "ALiBi's distance without a conversion").
float small_int_to_float(int i) { return intBitsToFloat(i + 0x4B400000) - 12582912.0; }

// ALiBi's term of query row q_row and key `key` (base 2): slope times the distance from the
// bottom-right aligned diagonal. The engine refuses ALiBi past 2^22 queries or keys
// (ValidateAttentionParams), so every distance in a sequence fits small_int_to_float; a tile's
// padding rows and keys past the lengths get a finite, unused term.
float alibi_bias_log2(float slope_log2, uint q_row, uint key, uint q_len, uint kv_len) {
  return slope_log2 * abs(small_int_to_float(int(key) - int(q_row) - diagonal_shift(q_len, kv_len)));
}

// The capped score C2 tanh(t / C2) as C2 - 2 C2 / (1 + 2^(2t / C)) (2t / C = 2 log2(e) t / C2): a
// multiply, an exp2, an add, a division and a subtraction per score. Fewer instructions than tanh
// through |x| and a sign is what counts in the coopmat2 kernels, whose per-score instructions bound
// them; a tanh without exp2 or division, but with more arithmetic, was slower (docs/tuning-log.md).
// Finite for every finite t; past |2t / C| of ~128 the power is inf or 0, and dividing by inf
// gives 0, so the score is +-C2 there and at +-inf (tests/test_score_mods.cc checks); NaN for NaN.
// softcapped_raw(x, power) is the same curve with the power's factor given: softcapped(t) is
// softcapped_raw(t, 2 / C).
float softcapped_raw(float raw, float softcap_power) {
  const float c2 = SOFTCAP * LOG2E;
  return c2 - 2.0 * c2 / (1.0 + exp2(raw * softcap_power));
}
float softcapped(float t) { return softcapped_raw(t, 2.0 / SOFTCAP); }

// Where the softcap is a score's only per-element modifier (no ALiBi, no mask), a kernel can cap
// the raw products element by element, with the softmax scale folded into the power:
// softcapped_raw(raw, softcap_power) with softcap_power = scale_log2 * 2 / SOFTCAP is
// softcapped(raw * scale_log2) with a multiply less.
bool softcap_alone() { return SOFTCAP > 0.0 && ALIBI == VKF_ALIBI_NONE && MASK == VKF_MASK_NONE; }

// score_mod's softcap and ALiBi, in their order, without the mask's term.
float score_mod_unmasked(float t, ScoreHead h, uint q_row, uint key, uint q_len, uint kv_len) {
  if (SOFTCAP > 0.0) t = softcapped(t);
  if (ALIBI != VKF_ALIBI_NONE) t -= alibi_bias_log2(h.slope_log2, q_row, key, q_len, kv_len);
  return t;
}

// score_mod's last modifier: the mask's term (mask_bias_log2's) added. A blocked pair is -inf
// whatever its score (no inf - inf = NaN).
float with_mask_term(float t, float mask_term) { return mask_term == NEG_INF ? NEG_INF : t + mask_term; }

// The modified score of query row q_row and key `key` of a sequence of q_len x kv_len, from its
// base-2 score t. h: score_head of the row's batch entry and head.
float score_mod(float t, ScoreHead h, uint q_row, uint key, uint q_len, uint kv_len) {
  t = score_mod_unmasked(t, h, q_row, key, q_len, kv_len);
  if (MASK != VKF_MASK_NONE && !bias_tiles()) t = with_mask_term(t, mask_bias_log2(h, q_row, key));
  return t;
}

// d score_mod / dt at the unmodified score t: the backward multiplies dS by it (ALiBi's and the
// bias's terms are constant in t; the softcap's derivative is 1 - tanh^2).
float score_mod_derivative(float t) {
  if (!(SOFTCAP > 0.0)) return 1.0;
  const float th = softcapped(t) / (SOFTCAP * LOG2E);
  return max(1.0 - th * th, 0.0);  // |th| may pass 1 by its rounding (a NaN t: its P is NaN anyway)
}

// The same derivative from the pair's P instead of its raw score, for kernels that do not keep the
// raw scores: log2(P) + LSE is the modified score, which with ALiBi's and the bias's terms taken
// back is C2 * tanh(t / C2). Where P is 0 it returns 0 (dS is 0 whatever the derivative), without a
// test of P: log2(0) is -inf, and so is the capped score, whose 1 - th^2 the max takes to 0. Rows
// that see no key (and padding rows) have an LSE of +inf, which counts as the largest float here
// (-inf + inf would be NaN); a float mask's blocked pairs (a -inf term taken back) keep the test.
// This leans on log2(0) = -inf and on infinities kept through min and max (GLSL leaves both
// undefined; the NVIDIA driver, the only one with these kernels, does so, and the tests' rows that
// see no key cover it), and on a finite ALiBi term. The test cost the backward with a softcap,
// ALiBi and sinks 3-4.5% (docs/tuning-log.md, "the softcap's derivative without a test of P").
float score_mod_derivative_from_p(float p, float lse_log2, ScoreHead h, uint q_row, uint key, uint q_len,
                                  uint kv_len) {
  if (!(SOFTCAP > 0.0)) return 1.0;
  if (float_mask() && p == 0.0) return 0.0;
  float capped = log2(p) + min(lse_log2, FLT_MAX);
  if (ALIBI != VKF_ALIBI_NONE) capped += alibi_bias_log2(h.slope_log2, q_row, key, q_len, kv_len);
  if (float_mask()) capped -= mask_bias_log2(h, q_row, key);
  const float th = capped / (SOFTCAP * LOG2E);
  return max(1.0 - th * th, 0.0);
}

// The backward's P of a pair from its unmodified base-2 score t and its row's LSE (base 2, the
// sink included). Its dS is P * (dP - delta) * score_mod_derivative(t).
float pair_p(float t, float lse_log2, ScoreHead h, uint q_row, uint key, uint q_len, uint kv_len) {
  return exp2(score_mod(t, h, q_row, key, q_len, kv_len) - lse_log2);
}

// Where the tensor-core forwards take a tile's P from (base 2): m_new - depth, with m_new the
// running max and depth the whole number of base-2 units by which the tile's own largest score lies
// below it (0 for the tile that holds the max), at most VKF_P_REFERENCE_RANGE. So P rounded to
// float16 keeps its bits when an earlier tile holds the row's max; O's float32 sums, kept relative
// to the same reference, grow by at most 2^64 (float16 V times any key count stays finite); the
// row's largest key has P = 1 exactly. The depth is whole so that, while the max stands, the
// rescales of O and l by exp2(old reference - new) are exact powers of two: with the tile's max
// itself as the reference, exp2 of a difference like 41.32 rounded l by ~1e-6, 4% of an LSE near
// 0 (docs/tuning-log.md, "whole-number reference depths"). Their sinks join the row only at its
// end (finish_row), so that a sink-dominated row's P keep their bits too.
#define VKF_P_REFERENCE_RANGE 64.0
// For a finite m_new (coopmat2's rows start from a finite floor); reference_depth takes -inf too.
float reference_depth_finite(float m_new, float tile_max) {
  return min(floor(m_new - tile_max), VKF_P_REFERENCE_RANGE);
}
float reference_depth(float m_new, float tile_max) {
  return m_new == tile_max ? 0.0 : reference_depth_finite(m_new, tile_max);  // -inf == -inf: 0, not NaN
}

// log2 of the factor that moves O and l from one reference (m_old - depth_old) to the next: the
// depths' difference exactly while the max stands. For finite maxima; reference_rescale_log2 also
// takes a row that has seen only masked keys (m_old = m_new = -inf: 0, not NaN).
float reference_rescale_log2_finite(float m_old, float depth_old, float m_new, float depth_new) {
  return (m_old - m_new) + (depth_new - depth_old);
}
float reference_rescale_log2(float m_old, float depth_old, float m_new, float depth_new) {
  return (m_old == m_new ? 0.0 : m_old - m_new) + (depth_new - depth_old);
}

// The end of a row of the tensor-core forwards: its running max m (their floor or -inf where it saw
// no key), reference depth and sum l of its keys (relative to m - depth), and its sink (base 2,
// -inf: none) give the factor for O's accumulator (0 for a row that saw no key) and the base-2 LSE:
// m + log2 of the sum relative to the max, not the reference + log2(l), whose rounding would swamp
// an LSE near 0. A row that saw no key gets its sink exactly, or -inf, even a sink below coopmat2's
// finite floor for m (max(m, sink) would be the floor there, and O 0 / 0); a NaN sum stays NaN.
void finish_row(float m, float depth, float l, float sink, out float o_scale, out float lse) {
  if (l == 0.0 && sink == NEG_INF) {
    o_scale = 0.0;
    lse = NEG_INF;
    return;
  }
  const float m_all = l == 0.0 ? sink : max(m, sink);
  const float keys_scale = l == 0.0 ? 0.0 : exp2(m - m_all) * exp2(-depth);  // exact without a sink above m
  const float sum = l * keys_scale + (sink == NEG_INF ? 0.0 : exp2(sink - m_all));
  o_scale = keys_scale / sum;
  lse = m_all + log2(sum);
}

#ifdef VKF_SCORE_MOD_BINDING_SINKS
// A head's sink logit in base 2; -inf without sinks.
float sink_log2(uint head) { return SINKS ? sink_logits[head] * LOG2E : NEG_INF; }

// Where a row's online softmax starts in the scalar kernels (the tensor-core forwards join the
// sink at the row's end: finish_row): running max m0 and sum l0 (relative to m0). The sink is the
// row's first score, with a zero value row: m0 = the sink, l0 = 1 (NaN for a sink of +inf or NaN,
// which makes the row NaN). Without sinks, or with a sink of -inf, which weighs nothing: -inf and 0.
void softmax_start(uint head, out float m0, out float l0) {
  m0 = sink_log2(head);
  l0 = m0 == NEG_INF ? 0.0 : exp2(m0 - m0);
}
#endif

#endif
