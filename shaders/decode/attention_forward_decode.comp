// Forward for few query rows over many keys (decode over a KV cache): one workgroup per (key
// split, KV head, batch) takes every query row of the KV head's group, G = q_heads / kv_heads heads
// x q_len rows (BLOCK_Q of them, the engine packs G * q_len <= BLOCK_Q), so each K and V row is
// read from memory once per split. The work is bound by that read: no shared tiles, no tensor
// cores. float16 storage; arithmetic float32.
//
// THREADS_PER_ROW (T) consecutive invocations share a step's keys: each holds HEAD_DIM / T columns
// of every packed query row (and reads those columns of K and V) in registers. The workgroup's
// KEY_GROUPS groups of T walk the split's keys KEYS_PER_STEP at a time each, with their own online
// softmax (base 2); at the end the groups merge in a fixed order through shared memory.
//
// A step's partial dot products are summed over the group by a reduce-scatter of shuffles: each
// lane ends with whole scores of its own KEYS_PER_LANE keys (DUPLICATES lanes share a key where T
// passes the step's keys), so the score modifiers, the mask and the exponentials run once per score
// and not once per lane. P goes back to every lane for P V by the same levels backwards; each lane
// keeps a partial row sum over its own keys, summed over the group at the end.
//
// One split (pc.split_keys >= kv_len): O and LSE are written. Several (SPLIT): each writes its
// rows' normalized O and base-2 LSE to the workspace (VKF_FWD_BINDING_O_STATE, _ROW_STATE), and
// decode/attention_decode_combine.comp merges them.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : require

#define VKF_DEFAULT_HEAD_DIM 128
#define VKF_DEFAULT_BLOCK_Q 4
#define VKF_DEFAULT_BLOCK_KV 16
#define VKF_DEFAULT_THREADS_PER_ROW 16
#include "common/attention_preamble.glsl"  // the engine sets BLOCK_KV = KEY_GROUPS * KEYS_PER_STEP
#include "common/constants.glsl"
#include "common/fma_dot.glsl"
#include "common/nonfinite.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_FWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_FWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_FWD_BINDING_MASK_TILES
#define VKF_SCORE_MOD_BINDING_SINKS VKF_FWD_BINDING_SINKS
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_FWD_BINDING_SEQUENCES
#include "common/sequences.glsl"  // strides are multiples of 8 elements here (the engine checks)
layout(constant_id = VKF_SPEC_WRITE_LSE) const bool WRITE_LSE = true;
layout(constant_id = VKF_SPEC_CHUNKED) const bool SPLIT = false;  // partial results to the workspace
// With a mask: its closed steps from the block summary, or from its elements (below).
layout(constant_id = VKF_SPEC_MASK_SUMMARY) const bool MASK_SUMMARY = true;
// Without the summary, the packed rows whose mask terms are read: row r's are row r % TERM_ROWS's
// (a mask broadcast over the group's heads repeats every q_len rows; over its rows too, it is one).
layout(constant_id = VKF_SPEC_MASK_TERM_ROWS) const uint TERM_ROWS = VKF_DEFAULT_BLOCK_Q;

const uint T = THREADS_PER_ROW;                       // invocations per key group, a power of two <= subgroup size
const uint ROW_U4 = HEAD_DIM / 8;                     // a float16 row in uvec4 words
const uint U4_PER_THREAD = ROW_U4 / T;                // words of a row each invocation holds
const uint COLUMNS = 8 * U4_PER_THREAD;               // columns each invocation holds
const uint KEY_GROUPS = WORKGROUP_SIZE / T;
const uint KEYS_PER_STEP = BLOCK_KV / KEY_GROUPS;     // keys a group loads at once (loads in flight)
const uint ROWS = BLOCK_Q;
// The reduce-scatter: its levels halve the keys each lane sums over, while both T and the keys allow.
// T and KEYS_PER_STEP are powers of two (T <= 16, KEYS_PER_STEP <= 8: decode_backend.cc). These
// specialization-constant expressions use arithmetic only: loops bounded by expressions with
// comparisons and selects were left rolled by the NVIDIA driver, which then indexed the arrays by
// compare-and-select chains and wrapped every shuffle in a convergence check (docs/tuning-log.md,
// "the decode kernel's scores summed by a reduce-scatter").
const uint KEYS_PER_LANE = (KEYS_PER_STEP + T - 1) / T;
const uint DUPLICATES = (T + KEYS_PER_STEP - 1) / KEYS_PER_STEP;  // lanes holding the same key
// log2 of a power of two x <= 16 (0 past it).
#define VKF_LOG2_POW2(x) ((((x) >> 1) & 1u) + (((x) >> 2) & 1u) * 2u + (((x) >> 3) & 1u) * 3u + (((x) >> 4) & 1u) * 4u)
const uint SCATTER_LEVELS = VKF_LOG2_POW2(T) - VKF_LOG2_POW2(DUPLICATES);
// (x + 15) / 16 below is 1 for 1 <= x <= 16 and 0 for x = 0: "x != 0" without a comparison.
// The keys a lane keeps at scatter level L (lane bit T >> (L + 1)); 0 where the level does not run.
#define VKF_SCATTER_KEYS(L) ((KEYS_PER_STEP >> ((L) + 1)) * (((T >> ((L) + 1)) + 15u) / 16u))
// 1 where butterfly level L (lane bit DUPLICATES >> (L + 1)) runs, else 0.
#define VKF_DUPLICATE_LEVEL(L) (((DUPLICATES >> ((L) + 1)) + 15u) / 16u)
// A masked pair's P as the gather carries it (bits, so no driver can drop the sign of -0.0): no
// P the softmax computes has these bits (it is +0.0, positive or NaN).
const uint MASKED_P = 0x80000000u;
// The levels, written out for L = 0 .. 3 where they are used (each a loop of 0 trips where the
// level does not run), on the step's arrays s (partial, then whole scores) and p_bits (P) of
// `lane`, the invocation's place in its key group. Its partner at a level is the subgroup
// invocation gl_SubgroupInvocationID ^ bit: the same place in the same group, as workgroups are laid
// over subgroups in order and key groups lie inside one (T <= the subgroup size).
// With 5 to 8 packed rows a lane holds the step's keys in its own order, slot u being key u ^
// first_own (load_step): at every level the keys it keeps are then its slots [0, half) and its
// partner's its slots [half, 2 half), and no select picks what to send. With up to 4 rows the loads
// in that order cost more than the selects they save (docs/tuning-log.md, "the decode kernel's keys
// in each lane's order").
// 1 where ROWS > 4; ROWS <= kDecodeMaxRows = 8 (decode_backend.h asserts <= 12, where this stays 0 or 1).
const uint KEYS_IN_LANE_ORDER = (ROWS + 3) / 8;
// scatter level L: the lane keeps half of its keys (in its own order its first half, else the
// upper half where its bit is set) and adds its partner's partials of them;
#define VKF_SCATTER(L)                                                             \
  [[unroll]] for (uint i = 0; i < VKF_SCATTER_KEYS(L); ++i) {                      \
    const bool upper = KEYS_IN_LANE_ORDER == 0 && (lane & (T >> ((L) + 1))) != 0;  \
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {                                   \
      const float sent = upper ? s[i][r] : s[i + VKF_SCATTER_KEYS(L)][r];          \
      const float kept = upper ? s[i + VKF_SCATTER_KEYS(L)][r] : s[i][r];          \
      s[i][r] = kept + subgroupShuffleXor(sent, T >> ((L) + 1));                   \
    }                                                                              \
  }
// butterfly level L: lanes that hold the same keys add their partials whole;
#define VKF_BUTTERFLY(L)                                                                       \
  [[unroll]] for (uint i = 0; i < KEYS_PER_LANE * VKF_DUPLICATE_LEVEL(L); ++i) {               \
    [[unroll]] for (uint r = 0; r < ROWS; ++r) s[i][r] += subgroupShuffleXor(s[i][r], DUPLICATES >> ((L) + 1)); \
  }
// gather level L, the scatter's backwards: the lane's keys doubled with its partner's P.
#define VKF_GATHER(L)                                                          \
  [[unroll]] for (uint i = 0; i < VKF_SCATTER_KEYS(L); ++i) {                  \
    const bool upper = KEYS_IN_LANE_ORDER == 0 && (lane & (T >> ((L) + 1))) != 0; \
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {                               \
      const uint received = subgroupShuffleXor(p_bits[i][r], T >> ((L) + 1));  \
      p_bits[i + VKF_SCATTER_KEYS(L)][r] = upper ? p_bits[i][r] : received;    \
      p_bits[i][r] = upper ? received : p_bits[i][r];                          \
    }                                                                          \
  }

layout(std430, set = 0, binding = VKF_FWD_BINDING_Q) readonly buffer q_block { uvec4 q_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_V) readonly buffer v_block { uvec4 v_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_O) writeonly buffer o_block { uvec4 o_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_LSE) writeonly buffer lse_block { float lse_data[]; };
#include "decode/split_parts.glsl"
VKF_DECLARE_SPLIT_PARTS(writeonly)  // SPLIT: this part of every packed row

// The groups' merge: each group's running max and sum per row, then O summed group by group.
shared float group_max[KEY_GROUPS * ROWS];
shared float group_sum[KEY_GROUPS * ROWS];
shared vec4 merged_o[ROWS * HEAD_DIM / 4];

void unpack8(uvec4 w, out vec4 lo, out vec4 hi) {
  lo = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
  hi = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
}

// A group's K and V words of keys key0 .. key0 + KEYS_PER_STEP - 1 (bases and strides in uvec4
// words), slot u holding key key0 + (u ^ key_order) (VKF_SCATTER); a key past the end reads the
// last key (key_end > 0) again, which the mask drops.
void load_step(uint key0, uint key_end, uint k_base, uint k_stride, uint v_base, uint v_stride, uint lane,
               uint key_order, out uvec4 k_words[KEYS_PER_STEP][U4_PER_THREAD],
               out uvec4 v_words[KEYS_PER_STEP][U4_PER_THREAD]) {
  [[unroll]] for (uint u = 0; u < KEYS_PER_STEP; ++u) {
    const uint key = min(key0 + (u ^ key_order), key_end - 1);
    [[unroll]] for (uint c = 0; c < U4_PER_THREAD; ++c) {
      k_words[u][c] = k_u4[k_base + key * k_stride + lane + c * T];
      v_words[u][c] = v_u4[v_base + key * v_stride + lane + c * T];
    }
  }
}

// Without MASK_SUMMARY, the mask's terms (mask_bias_log2) of the lane's own keys key0 .. key0 +
// KEYS_PER_LANE - 1 for packed rows 0 .. TERM_ROWS - 1 (those of the others repeat them): -inf
// for keys past the split's and padding rows, which count as blocked below. With it, nothing is
// read here (zeros).
void mask_terms(uint key0, uint key_end, uint rows, const ScoreHead modifiers[ROWS], const uint q_row[ROWS],
                out float terms[KEYS_PER_LANE][TERM_ROWS]) {
  [[unroll]] for (uint i = 0; i < KEYS_PER_LANE; ++i) {
    [[unroll]] for (uint r = 0; r < TERM_ROWS; ++r) {
      const uint key = key0 + i;
      terms[i][r] = MASK == VKF_MASK_NONE || MASK_SUMMARY ? 0.0
                    : key < key_end && r < rows ? mask_bias_log2(modifiers[r], q_row[r], key)
                                                : NEG_INF;
    }
  }
}

// Whether the mask blocks every pair of the step of every key group in the subgroup that runs one,
// from each lane's mask_terms: the same in all their lanes, so a key group's lanes stay together.
// One vote, where the key group's own verdict took a shuffle per scatter level (wrapped by the
// NVIDIA driver in convergence checks: 5% of a masked call with 8 packed rows, docs/tuning-log.md);
// a step is then skipped where the whole subgroup's steps are closed.
bool mask_closes_step(const float terms[KEYS_PER_LANE][TERM_ROWS]) {
  if (MASK == VKF_MASK_NONE) return false;
  uint open = 0;
  [[unroll]] for (uint i = 0; i < KEYS_PER_LANE; ++i) {
    [[unroll]] for (uint r = 0; r < TERM_ROWS; ++r) open |= terms[i][r] != NEG_INF ? 1u : 0u;
  }
  return !subgroupAny(open != 0);
}

void main() {
  const uint split = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint group_size = pc.q_heads / pc.kv_heads;
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len;
  const uint rows = group_size * q_len;  // packed rows: head-major, then query row
  if (rows == 0) return;                 // a batch entry without queries
  const uint lane = gl_LocalInvocationIndex % T, key_group = gl_LocalInvocationIndex / T;
  const uint first_own = lane / DUPLICATES * KEYS_PER_LANE;  // the lane's own keys in a step: key0 + first_own + i
  const uint key_order = KEYS_IN_LANE_ORDER * first_own;  // slot u of a step holds key u ^ key_order

  // This split's keys, within those that some row sees (the band of rows 0 .. q_len - 1: the
  // first row's first key to the last row's last); a split with none (past a shorter sequence's
  // keys, outside the window) writes parts that weigh nothing.
  const uint key_begin = max(split * pc.split_keys, row_keys_begin(0, q_len, seq.kv_len));
  const uint key_end = min(split * pc.split_keys + pc.split_keys, row_keys_end(q_len - 1, q_len, seq.kv_len));

  // In uvec4 words: 8 float16 elements.
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0) / 8, k_stride = tensor_row_stride(VKF_TENSOR_K) / 8;
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0) / 8, v_stride = tensor_row_stride(VKF_TENSOR_V) / 8;
  // Software pipelined: the next step's K and V words are read before this step's arithmetic, so
  // that a group's reads stay in flight while it computes, and the first step's before Q's.
  const uint key_step = KEY_GROUPS * KEYS_PER_STEP;
  uvec4 k_words[KEYS_PER_STEP][U4_PER_THREAD], v_words[KEYS_PER_STEP][U4_PER_THREAD];
  // A step whose pairs the mask blocks for every packed row is neither loaded nor computed (without
  // the summary: where every key group of the subgroup running a step finds its step closed), the
  // same in the whole key group (its lanes' shuffles stay together). With MASK_SUMMARY the steps'
  // verdicts come from the mask's block summary; without, from the mask's terms of the pairs of
  // the steps the subgroup's key groups take together (mask_closes_step), read two steps ahead,
  // which are then the scores' mask terms too: the summary's pass and
  // barrier before this kernel cost a short key range more than those reads, a long one less
  // (docs/tuning-log.md, "the register decode kernel and the mask's block summary"). There the
  // first step is loaded before its verdict.
  const uint first_key = key_begin + key_group * KEYS_PER_STEP;
  MaskWalk closed_keys = mask_walk();  // the summary's bits, read as the loop goes
  bool closed = MASK_SUMMARY && first_key < key_end &&
                mask_closes_heads_keys(closed_keys, batch, kv_head * group_size, group_size, 0, q_len, first_key,
                                       min(first_key + KEYS_PER_STEP, key_end));
  if (first_key < key_end && !closed) {
    load_step(first_key, key_end, k_base, k_stride, v_base, v_stride, lane, key_order, k_words, v_words);
  }
  // Packed row r is query row r % q_len of head kv_head * group_size + r / q_len.
  vec4 q[ROWS][2 * U4_PER_THREAD];
  uint q_row[ROWS];
  ScoreHead modifiers[ROWS];
  float start_max[ROWS], start_sum[ROWS];
  for (uint r = 0; r < ROWS; ++r) {
    q_row[r] = r < rows ? r % q_len : 0;
    const uint head = kv_head * group_size + min(r, rows - 1) / q_len;
    modifiers[r] = score_head(batch, head);
    // The row's softmax starts from its head's sink in one key group of one part only.
    softmax_start(head, start_max[r], start_sum[r]);
    if (split != 0 || key_group != 0) {
      start_max[r] = NEG_INF;
      start_sum[r] = 0.0;
    }
    const uint base = (tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0) + q_row[r] * tensor_row_stride(VKF_TENSOR_Q)) / 8;
    for (uint c = 0; c < U4_PER_THREAD; ++c) {
      vec4 lo = vec4(0.0), hi = vec4(0.0);
      if (r < rows) unpack8(q_u4[base + lane + c * T], lo, hi);
      q[r][2 * c] = lo * pc.scale_log2;
      q[r][2 * c + 1] = hi * pc.scale_log2;
    }
  }

  float terms[KEYS_PER_LANE][TERM_ROWS], terms_next[KEYS_PER_LANE][TERM_ROWS];
  mask_terms(first_key + first_own, key_end, rows, modifiers, q_row, terms);
  mask_terms(first_key + key_step + first_own, key_end, rows, modifiers, q_row, terms_next);
  if (!MASK_SUMMARY) closed = first_key < key_end && mask_closes_step(terms);

  float row_max[ROWS], row_sum[ROWS];
  vec4 o[ROWS][2 * U4_PER_THREAD];
  for (uint r = 0; r < ROWS; ++r) {
    row_max[r] = start_max[r];
    row_sum[r] = lane < DUPLICATES ? start_sum[r] : 0.0;  // the lanes' partial sums are added at the end
    for (uint c = 0; c < 2 * U4_PER_THREAD; ++c) o[r][c] = vec4(0.0);
  }

  for (uint key0 = first_key; key0 < key_end; key0 += key_step) {
    const uint next_key0 = key0 + key_step;
    const bool next_closed =
        next_key0 < key_end && (MASK_SUMMARY ? mask_closes_heads_keys(closed_keys, batch, kv_head * group_size, group_size,
                                                                      0, q_len, next_key0,
                                                                      min(next_key0 + KEYS_PER_STEP, key_end))
                                             : mask_closes_step(terms_next));
    uvec4 k_next[KEYS_PER_STEP][U4_PER_THREAD], v_next[KEYS_PER_STEP][U4_PER_THREAD];
    if (!next_closed) {
      load_step(next_key0, key_end, k_base, k_stride, v_base, v_stride, lane, key_order, k_next, v_next);
    }
    float terms_after[KEYS_PER_LANE][TERM_ROWS];
    mask_terms(next_key0 + key_step + first_own, key_end, rows, modifiers, q_row, terms_after);
    if (!closed) {  // a step the mask closes adds nothing
      // Each lane's partial dot products of every key and row, then the reduce-scatter.
      float s[KEYS_PER_STEP][ROWS];
      [[unroll]] for (uint u = 0; u < KEYS_PER_STEP; ++u) {
        vec4 k_cols[2 * U4_PER_THREAD];
        [[unroll]] for (uint c = 0; c < U4_PER_THREAD; ++c) unpack8(k_words[u][c], k_cols[2 * c], k_cols[2 * c + 1]);
        [[unroll]] for (uint r = 0; r < ROWS; ++r) {
          // One fma chain (common/fma_dot.glsl); fma_dot_add has no loop, so the loops stay those
          // DecodeLoopCost counts.
          float dot_part = 0.0;
          [[unroll]] for (uint c = 0; c < 2 * U4_PER_THREAD; ++c) dot_part = fma_dot_add(dot_part, q[r][c], k_cols[c]);
          s[u][r] = dot_part;
        }
      }
      VKF_SCATTER(0) VKF_SCATTER(1) VKF_SCATTER(2) VKF_SCATTER(3)
      VKF_BUTTERFLY(0) VKF_BUTTERFLY(1) VKF_BUTTERFLY(2) VKF_BUTTERFLY(3)
      // The lane's own keys: key0 + first_own + i. Masked (past the split, outside the row's band, a
      // padding row) or a score of -inf: no effect.
      float step_max[ROWS];
      [[unroll]] for (uint r = 0; r < ROWS; ++r) {
        [[unroll]] for (uint i = 0; i < KEYS_PER_LANE; ++i) {
          const uint key = key0 + first_own + i;
          const bool visible = key < key_end && r < rows && key_visible(q_row[r], key, q_len, seq.kv_len);
          float score = s[i][r];
          score = score_mod_unmasked(score, modifiers[r], q_row[r], key, q_len, seq.kv_len);
          if (MASK != VKF_MASK_NONE) {
            score = with_mask_term(score, MASK_SUMMARY ? mask_bias_log2(modifiers[r], q_row[r], key)
                                                       : terms[i][r % TERM_ROWS]);
          }
          s[i][r] = visible ? score : NEG_INF;
          step_max[r] = i == 0 ? s[i][r] : max_keeping_nan(step_max[r], s[i][r]);
        }
        // Over the scatter's lane bits: the DUPLICATES lanes of a key hold the same scores already.
        [[unroll]] for (uint level = 0; level < SCATTER_LEVELS; ++level) {
          step_max[r] = max_keeping_nan(step_max[r], subgroupShuffleXor(step_max[r], T >> (level + 1)));
        }
      }
      // Online softmax, branch-free: a row that has seen nothing yet keeps O = 0 and adds nothing to
      // its sum (0, or its sink's). A masked pair's P is MASKED_P, which P V tells from a P that
      // underflowed to +0.0 (a masked key's V never enters: it may hold inf or NaN).
      uint p_bits[KEYS_PER_STEP][ROWS];
      [[unroll]] for (uint r = 0; r < ROWS; ++r) {
        const float new_max = max_keeping_nan(row_max[r], step_max[r]);
        const float base = new_max == NEG_INF ? 0.0 : new_max;  // exp2(-inf - base) = 0, never NaN
        const float rescale = exp2(row_max[r] - base);          // 0 the first time
        row_sum[r] *= rescale;
        [[unroll]] for (uint c = 0; c < 2 * U4_PER_THREAD; ++c) o[r][c] *= rescale;
        [[unroll]] for (uint i = 0; i < KEYS_PER_LANE; ++i) {
          const bool masked = s[i][r] == NEG_INF;
          const float p = exp2(s[i][r] - base);  // 0 where masked; NaN for a NaN or +inf score, as the contract says
          row_sum[r] += p;
          p_bits[i][r] = masked ? MASKED_P : floatBitsToUint(p);
        }
        row_max[r] = new_max;
      }
      // Every key's P in every lane: the scatter's levels backwards (xor shuffles: an index shuffle
      // whose index differs per lane cost the NVIDIA driver a loop of MATCH instructions each).
      VKF_GATHER(3) VKF_GATHER(2) VKF_GATHER(1) VKF_GATHER(0)
      [[unroll]] for (uint u = 0; u < KEYS_PER_STEP; ++u) {
        [[unroll]] for (uint c = 0; c < U4_PER_THREAD; ++c) {
          vec4 lo, hi;
          unpack8(v_words[u][c], lo, hi);
          [[unroll]] for (uint r = 0; r < ROWS; ++r) {
            const bool seen = p_bits[u][r] != MASKED_P;
            const float p = uintBitsToFloat(p_bits[u][r]);
            o[r][2 * c] = seen ? o[r][2 * c] + p * lo : o[r][2 * c];
            o[r][2 * c + 1] = seen ? o[r][2 * c + 1] + p * hi : o[r][2 * c + 1];
          }
        }
      }
    }
    [[unroll]] for (uint u = 0; u < KEYS_PER_STEP; ++u) {
      [[unroll]] for (uint c = 0; c < U4_PER_THREAD; ++c) {
        k_words[u][c] = k_next[u][c];
        v_words[u][c] = v_next[u][c];
      }
    }
    [[unroll]] for (uint i = 0; i < KEYS_PER_LANE; ++i) {
      [[unroll]] for (uint r = 0; r < TERM_ROWS; ++r) {
        terms[i][r] = terms_next[i][r];
        terms_next[i][r] = terms_after[i][r];
      }
    }
    closed = next_closed;
  }

  // The group's row sums: its lanes' partials over their own keys, added over the scatter's lane
  // bits only (the DUPLICATES lanes of a key hold the same partial: adding them would count it twice).
  [[unroll]] for (uint r = 0; r < ROWS; ++r) {
    [[unroll]] for (uint level = 0; level < SCATTER_LEVELS; ++level) {
      row_sum[r] += subgroupShuffleXor(row_sum[r], T >> (level + 1));
    }
  }
  // Merge the key groups: the rows' max over groups, then each group's sum and O rescaled to it,
  // added in group order (deterministic).
  if (lane == 0) {
    for (uint r = 0; r < ROWS; ++r) {
      group_max[key_group * ROWS + r] = row_max[r];
      group_sum[key_group * ROWS + r] = row_sum[r];
    }
  }
  barrier();
  float merged_max[ROWS], merged_sum[ROWS], rescale[ROWS];
  for (uint r = 0; r < ROWS; ++r) {
    merged_max[r] = NEG_INF;
    for (uint g = 0; g < KEY_GROUPS; ++g) {
      merged_max[r] = max_keeping_nan(group_max[g * ROWS + r], merged_max[r]);
    }
    merged_sum[r] = 0.0;
    for (uint g = 0; g < KEY_GROUPS; ++g) {
      const float m = group_max[g * ROWS + r];
      merged_sum[r] += m == NEG_INF ? 0.0 : group_sum[g * ROWS + r] * exp2(m - merged_max[r]);
    }
    rescale[r] = row_max[r] == NEG_INF ? 0.0 : exp2(row_max[r] - merged_max[r]);
  }
  for (uint g = 0; g < KEY_GROUPS; ++g) {
    if (key_group == g) {
      for (uint r = 0; r < ROWS; ++r) {
        for (uint c = 0; c < U4_PER_THREAD; ++c) {
          for (uint half_word = 0; half_word < 2; ++half_word) {
            const uint at = r * (HEAD_DIM / 4) + 2 * (lane + c * T) + half_word;
            // A group that saw nothing adds nothing (its O is 0, and 0 * NaN would not be).
            const vec4 mine = row_max[r] == NEG_INF ? vec4(0.0) : o[r][2 * c + half_word] * rescale[r];
            merged_o[at] = g == 0 ? mine : merged_o[at] + mine;
          }
        }
      }
    }
    barrier();
  }

  // Write: invocation i takes uvec4 words i, i + WORKGROUP_SIZE, ... of the packed rows.
  const uint parts = SPLIT ? split_part_count() : 1;
  for (uint i = gl_LocalInvocationIndex; i < rows * ROW_U4; i += WORKGROUP_SIZE) {
    const uint r = i / ROW_U4, word = i % ROW_U4;
    const uint head = kv_head * group_size + r / q_len, n = r % q_len;
    // A row that saw no key: O = 0 (LSE -inf below); a NaN sum gives NaN.
    const float inv_sum = merged_sum[r] == 0.0 ? 0.0 : 1.0 / merged_sum[r];
    const vec4 lo = merged_o[r * (HEAD_DIM / 4) + 2 * word] * inv_sum;
    const vec4 hi = merged_o[r * (HEAD_DIM / 4) + 2 * word + 1] * inv_sum;
    const float lse_log2 = merged_max[r] + log2(merged_sum[r]);  // -inf where the row saw no key
    if (SPLIT) {
      const uint part = first_part_of_row(batch, head, n, parts) + split;
      o_part[part * (HEAD_DIM / 4) + 2 * word] = lo;
      o_part[part * (HEAD_DIM / 4) + 2 * word + 1] = hi;
      if (word == 0) lse_part[part] = lse_log2;
    } else {
      const uint o_at = (tensor_base(VKF_TENSOR_O, batch, head, seq.q_row0) + n * tensor_row_stride(VKF_TENSOR_O)) / 8;
      o_u4[o_at + word] = uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw), packHalf2x16(hi.xy), packHalf2x16(hi.zw));
      if (WRITE_LSE && word == 0) lse_data[lse_index(batch, head, seq, n)] = lse_log2 * LN2;
    }
  }
}
