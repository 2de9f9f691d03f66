// FlashAttention-2 forward, scalar (no tensor cores), register-tiled: one workgroup per (Q tile,
// head, batch), built for throughput.
//
// The workgroup's BLOCK_Q query rows are split into row groups of ROWS_PER_THREAD rows; the
// THREADS_PER_ROW invocations of a row group (consecutive, aligned) each own a register block of
// S (its rows x the keys lane, lane + THREADS_PER_ROW, ...) and of O (its rows x every
// THREADS_PER_ROW-th word of the head dim). Each shared-memory word a lane reads feeds
// ROWS_PER_THREAD (K words) or KEYS_PER_THREAD (Q words) products. Q stays in shared memory; K
// and V of each key tile are staged together; P goes through shared memory from the lanes that
// computed it to the lanes that own its O columns.
//
// Variants by define: VKF_STORAGE_F16, VKF_SUBGROUP_OPS (row reductions), VKF_FLOAT16_MATH
// (scalar/register_tile.glsl), VKF_FLOAT_K_TILE (with float16 math, K staged as floats). The engine
// picks this kernel for views at 16-byte offsets with strides and head dim multiples of 8
// elements, ROWS_PER_THREAD = BLOCK_Q * THREADS_PER_ROW / WORKGROUP_SIZE whole, and THREADS_PER_ROW
// dividing both BLOCK_KV and the words of a row; other calls, and instrumented ones, run
// scalar/attention_forward.comp.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#define VKF_DEFAULT_HEAD_DIM 64
#define VKF_DEFAULT_BLOCK_Q 64
#define VKF_DEFAULT_BLOCK_KV 32
#define VKF_DEFAULT_THREADS_PER_ROW 8
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_WRITE_LSE) const bool WRITE_LSE = true;
layout(constant_id = VKF_SPEC_CHUNKED) const bool CHUNKED = false;  // false: one pass over all keys

#include "scalar/tensor_io.glsl"
#include "scalar/register_tile.glsl"
#include "scalar/row_reduce.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_FWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_FWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_FWD_BINDING_MASK_TILES
#define VKF_SCORE_MOD_BINDING_SINKS VKF_FWD_BINDING_SINKS
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_FWD_BINDING_SEQUENCES
#include "common/sequences.glsl"

const uint ROWS_PER_THREAD = BLOCK_Q * THREADS_PER_ROW / WORKGROUP_SIZE;
const uint KEYS_PER_THREAD = BLOCK_KV / THREADS_PER_ROW;
const uint ROW_WORDS = VKF_TILED_ROW_WORDS(HEAD_DIM, WORD_COLS);
const uint STRIDE = VKF_ODD_STRIDE(ROW_WORDS);
const uint GLOBAL_ROW_WORDS = HEAD_DIM / GLOBAL_COLS;
const uint WORDS_PER_THREAD = ROW_WORDS / THREADS_PER_ROW;      // of O: words lane, lane + THREADS_PER_ROW, ...
const uint VEC4_PER_THREAD = WORDS_PER_THREAD * WORD_COLS / 4;  // ...as vec4 accumulators
const uint HEAD_VEC4 = HEAD_DIM / 4;                            // a row of the chunked state
const uint ROW_STATE_FLOATS = VKF_FWD_ROW_STATE_FLOATS(THREADS_PER_ROW);  // per row: m, the lanes' l, their l_error
// Loops unrolled by hand: the driver does not unroll one whose trip count is a specialization
// constant, and their index, compare and branch cost issue slots (3-5%: docs/tuning-log.md).
const uint S_UNROLL = VKF_TILED_FORWARD_S_WORDS_PER_STEP;
const uint PV_UNROLL = VKF_TILED_FORWARD_PV_KEYS_PER_STEP;
const uint P_STRIDE = VKF_TILED_P_STRIDE(BLOCK_KV, VKF_FLOAT16_MATH != 0 ? 2 : 4);

VKF_TENSOR_WORDS_IN(VKF_FWD_BINDING_Q, q_data);
VKF_TENSOR_WORDS_IN(VKF_FWD_BINDING_K, k_data);
VKF_TENSOR_WORDS_IN(VKF_FWD_BINDING_V, v_data);
VKF_TENSOR_OUT(VKF_FWD_BINDING_O, o_data);
layout(std430, set = 0, binding = VKF_FWD_BINDING_LSE) writeonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_O_STATE) buffer o_state_block { vec4 o_state[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_ROW_STATE) buffer row_state_block { float row_state[]; };

shared word_t q_tile[VKF_SMEM_TILED_WORDS(BLOCK_Q, STRIDE)];
#if VKF_FLOAT_K_TILE || !VKF_HALF_WORDS
// K as floats, each element widened once where it is staged instead of in every row group that
// reads it (words of halves take twice the shared memory: the engine picks this where it fits).
#define VKF_K_FLOATS 1
const uint K_STRIDE = VKF_ODD_STRIDE(HEAD_DIM / 4);
shared vec4 k_tile[VKF_SMEM_TILED_WORDS(BLOCK_KV, K_STRIDE)];
#else
#define VKF_K_FLOATS 0
shared word_t k_tile[VKF_SMEM_TILED_WORDS(BLOCK_KV, STRIDE)];
#endif
shared word_t v_tile[VKF_SMEM_TILED_WORDS(BLOCK_KV, STRIDE)];
shared p_t p_tile[VKF_SMEM_TILED_P_ELEMENTS(BLOCK_Q, P_STRIDE)];
#if VKF_FLOAT16_MATH
// The largest |value| (word_abs_max_bits) of each V row of the step, then of the whole V tile,
// where it is at least FLOAT16_PARTIAL_SAFE_BITS; else 0.
shared uint v_abs_max_bits[VKF_SMEM_TILED_ABS_MAX_UINTS(BLOCK_KV)];
const uint V_TILE_BITS = BLOCK_KV;
#endif

VKF_DEFINE_VEC4_STORER(store_o4, o_data)

VKF_DEFINE_STAGER(stage_q, q_tile, q_data, BLOCK_Q)
// K and V of a step (K widened to floats where the tile holds floats); V guarded.
#if VKF_K_FLOATS
VKF_DEFINE_PAIR_STAGER(stage_kv, k_tile, k_data, VKF_STAGE_WORD_WIDENED, K_STRIDE, GLOBAL_COLS / 4, v_tile, v_data, true,
                       BLOCK_KV)
#else
VKF_DEFINE_PAIR_STAGER(stage_kv, k_tile, k_data, VKF_STAGE_WORD, STRIDE, WORDS_PER_GLOBAL, v_tile, v_data, true, BLOCK_KV)
#endif

uint row_group_first_row() { return (gl_LocalInvocationIndex / THREADS_PER_ROW) * ROWS_PER_THREAD; }
uint lane_id() { return gl_LocalInvocationIndex % THREADS_PER_ROW; }

// Word w of staged key `key` as floats.
void k_word(uint key, uint w, out vec4 kx[WORD_VEC4S]) {
#if VKF_K_FLOATS
  [[unroll]] for (uint h = 0; h < WORD_VEC4S; ++h) kx[h] = k_tile[key * K_STRIDE + w * WORD_VEC4S + h];
#else
  word_to_f32(k_tile[key * STRIDE + w], kx);
#endif
}

// S (base 2) of this invocation's rows x keys lane + j * THREADS_PER_ROW of the staged tiles.
// Products and sums float32: the scores' absolute error is what the softmax sees, and a float16
// sum of even a few products of large logits is off by more than the contract allows.
void scores(out float s[ROWS_PER_THREAD][KEYS_PER_THREAD]) {
  const uint row0 = row_group_first_row(), lane = lane_id();
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r)
    [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) s[r][j] = 0.0;
  for (uint w_step = 0; w_step < ROW_WORDS; w_step += S_UNROLL) {
    [[unroll]] for (uint u = 0; u < S_UNROLL; ++u) {
      const uint w = w_step + u;
      if (ROW_WORDS % S_UNROLL != 0 && w >= ROW_WORDS) break;
      // Q's words of halves widened here: 8 conversions per row, for KEYS_PER_THREAD x 8 products
      // each; K's too (8 per key) unless K is staged as floats.
      vec4 qx[ROWS_PER_THREAD][WORD_VEC4S];
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) word_to_f32(q_tile[(row0 + r) * STRIDE + w], qx[r]);
      [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) {
        vec4 kx[WORD_VEC4S];
        k_word(lane + j * THREADS_PER_ROW, w, kx);
        [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) s[r][j] = word_dot_add(s[r][j], qx[r], kx);
      }
    }
  }
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r)
    [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) s[r][j] *= pc.scale_log2;
}

// acc[r][i]: vec4 i of this invocation's columns of row r, at vec4 column acc_column(i) of the row.
uint acc_column(uint i) { return word_vec4_column(lane_id(), THREADS_PER_ROW, i); }

// acc += P V over the staged tile (P = the stored P x tile_scale[r]); row r with float16 products
// where float16_products[r] (the keys it sees hold only finite V there). `visible_keys[r]`: with
// `masked`, row r's products stop there (a key it cannot see may hold inf in V, and 0 x inf is NaN:
// common/nonfinite.glsl).
void add_pv(inout vec4 acc[ROWS_PER_THREAD][VEC4_PER_THREAD], bool float16_products[ROWS_PER_THREAD],
            float tile_scale[ROWS_PER_THREAD], bool masked, uint visible_first[ROWS_PER_THREAD],
            uint visible_end[ROWS_PER_THREAD]) {
  const uint row0 = row_group_first_row(), lane = lane_id();
  bool any_float32 = false;
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) any_float32 = any_float32 || !float16_products[r];
#if VKF_FLOAT16_MATH
  {
    for (uint c0 = 0; c0 < BLOCK_KV; c0 += FLOAT16_TERMS) {
      f16vec2 part[ROWS_PER_THREAD][4 * WORDS_PER_THREAD];
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r)
        [[unroll]] for (uint i = 0; i < 4 * WORDS_PER_THREAD; ++i) part[r][i] = f16vec2(0.0);
      const uint c_end = min(c0 + FLOAT16_TERMS, BLOCK_KV);
      for (uint c_step = c0; c_step < c_end; c_step += PV_UNROLL) {
        [[unroll]] for (uint u = 0; u < PV_UNROLL; ++u) {
          const uint c = c_step + u;
          if (BLOCK_KV % PV_UNROLL != 0 && c >= c_end) break;
          f16vec2 p[ROWS_PER_THREAD];
          [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) p[r] = f16vec2(p_tile[(row0 + r) * P_STRIDE + c]);
          [[unroll]] for (uint k = 0; k < WORDS_PER_THREAD; ++k) {
            const word_t v = v_tile[c * STRIDE + lane + k * THREADS_PER_ROW];
            [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
              if (masked && (c < visible_first[r] || c >= visible_end[r])) continue;
              part[r][4 * k + 0] = fma(p[r], unpackFloat2x16(v.x), part[r][4 * k + 0]);
              part[r][4 * k + 1] = fma(p[r], unpackFloat2x16(v.y), part[r][4 * k + 1]);
              part[r][4 * k + 2] = fma(p[r], unpackFloat2x16(v.z), part[r][4 * k + 2]);
              part[r][4 * k + 3] = fma(p[r], unpackFloat2x16(v.w), part[r][4 * k + 3]);
            }
          }
        }
      }
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
        if (!float16_products[r]) continue;
        [[unroll]] for (uint k = 0; k < WORDS_PER_THREAD; ++k) {
          acc[r][2 * k] = fma(vec4(vec2(part[r][4 * k]), vec2(part[r][4 * k + 1])), vec4(tile_scale[r]), acc[r][2 * k]);
          acc[r][2 * k + 1] =
              fma(vec4(vec2(part[r][4 * k + 2]), vec2(part[r][4 * k + 3])), vec4(tile_scale[r]), acc[r][2 * k + 1]);
        }
      }
    }
    if (!any_float32) return;
  }
#endif
  for (uint c = 0; c < BLOCK_KV; ++c) {
    float p[ROWS_PER_THREAD];
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) p[r] = float(p_tile[(row0 + r) * P_STRIDE + c]) * tile_scale[r];
    [[unroll]] for (uint k = 0; k < WORDS_PER_THREAD; ++k) {
      const word_t v = v_tile[c * STRIDE + lane + k * THREADS_PER_ROW];
#if VKF_FLOAT16_MATH
      vec4 vx[WORD_VEC4S];
      word_to_f32(v, vx);
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
        if (float16_products[r] || (masked && (c < visible_first[r] || c >= visible_end[r]))) continue;
        acc[r][2 * k] += p[r] * vx[0];
        acc[r][2 * k + 1] += p[r] * vx[1];
      }
#else
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
        if (float16_products[r] || (masked && (c < visible_first[r] || c >= visible_end[r]))) continue;
        acc[r][k] += p[r] * v;
      }
#endif
    }
  }
}

void main() {
  const uint tid = gl_LocalInvocationIndex;
  const uint lane = lane_id(), row0 = row_group_first_row();
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);  // GQA / MQA
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  if (q_begin >= q_len) return;  // past this batch entry's queries (a shorter sequence)
  const uint q_end = min(q_begin + BLOCK_Q, q_len);
  const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0), q_stride = tensor_row_stride(VKF_TENSOR_Q);
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);

#if VKF_FLOAT16_MATH
  for (uint i = tid; i < VKF_SMEM_TILED_ABS_MAX_UINTS(BLOCK_KV); i += WORKGROUP_SIZE) v_abs_max_bits[i] = 0;
  barrier();  // zeroed before the first staging's atomics
#endif
  stage_q(q_base, q_stride, q_begin, q_len);

  // Per row r of this invocation (query q_begin + row0 + r): the running max of S (base 2, the same
  // in every lane of the row group), this lane's share of the running sum, its columns of O.
  // l is a compensated sum, l_error its correction: a row whose largest key holds P = 1 and whose
  // other keys hold P near float32's epsilon (an LSE near 0) lost the low bits of their sums to
  // one rounding per tile and per reduction step (docs/tuning-log.md, "the scalar forward's row sums").
  float m[ROWS_PER_THREAD], l[ROWS_PER_THREAD], l_error[ROWS_PER_THREAD];
  vec4 acc[ROWS_PER_THREAD][VEC4_PER_THREAD];
  uint row_first_key[ROWS_PER_THREAD], row_keys[ROWS_PER_THREAD];  // row r sees keys [row_first_key[r], row_keys[r])
  float sink_m, sink_l;  // where each row's softmax starts: from the sink, if any (lane 0's share holds it)
  softmax_start(head, sink_m, sink_l);
  const ScoreHead modifiers = score_head(batch, head);
  const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    m[r] = sink_m;
    l[r] = lane == 0 ? sink_l : 0.0;
    l_error[r] = 0.0;
    [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) acc[r][i] = vec4(0.0);
    row_first_key[r] = row_keys_begin(q_begin + row0 + r, q_len, kv_len);
    row_keys[r] = row_keys_end(q_begin + row0 + r, q_len, kv_len);
  }

  // A later chunk resumes where the last one stopped (the same results as one pass).
  if (CHUNKED && pc.chunk_begin > 0) {
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      const uint q_row = q_begin + row0 + r;
      if (q_row >= q_len) continue;
      const uint row_index = (batch * pc.q_heads + head) * pc.q_len + q_row;
      m[r] = row_state[row_index * ROW_STATE_FLOATS];
      l[r] = row_state[row_index * ROW_STATE_FLOATS + 1 + lane];
      l_error[r] = row_state[row_index * ROW_STATE_FLOATS + 1 + THREADS_PER_ROW + lane];
      [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) acc[r][i] = o_state[row_index * HEAD_VEC4 + acc_column(i)];
    }
  }

  // Tiles wholly outside the rows' band are never visited; a chunk visits its own keys only.
  const uint kv_first = first_visible_kv_tile(q_begin, BLOCK_KV, q_len, kv_len);
  const uint kv_end = CHUNKED ? min(visible_kv_end(q_begin, q_end, q_len, kv_len), pc.chunk_end)
                              : visible_kv_end(q_begin, q_end, q_len, kv_len);
  MaskWalk closed_keys = mask_walk();  // the tiles the mask closes, read as the loop goes
  for (uint kv_begin = CHUNKED ? max(pc.chunk_begin, kv_first) : kv_first; kv_begin < kv_end; kv_begin += BLOCK_KV) {
    if (mask_closes_keys(closed_keys, mask_summary, q_begin, q_end, kv_begin, min(kv_begin + BLOCK_KV, kv_len))) continue;
    const uint staged_v_bits = stage_kv(k_base, k_stride, v_base, v_stride, kv_begin, kv_len);
#if VKF_FLOAT16_MATH
    // Workgroup scope: the default, device scope, needs vulkanMemoryModelDeviceScope where the
    // device enables the Vulkan memory model (the tensor-core kernels do). Only unsafe values, as
    // for the rows' slots (VKF_GUARD_WORD).
    if (staged_v_bits >= FLOAT16_PARTIAL_SAFE_BITS) {
      atomicMax(v_abs_max_bits[V_TILE_BITS], staged_v_bits, gl_ScopeWorkgroup, 0, 0);
    }
#endif
    barrier();  // K and V (and, on the first step, Q) staged

    const bool masked_tile = tile_needs_mask(q_begin, BLOCK_Q, kv_begin, BLOCK_KV, q_len, kv_len);
    uint visible_first[ROWS_PER_THREAD], visible_end[ROWS_PER_THREAD];  // the row's keys of this tile
    bool pv_in_float16[ROWS_PER_THREAD];
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      visible_first[r] = WINDOW_LEFT ? uint(clamp(int(row_first_key[r]) - int(kv_begin), 0, int(BLOCK_KV))) : 0u;
      visible_end[r] = uint(clamp(int(row_keys[r]) - int(kv_begin), 0, int(BLOCK_KV)));
#if VKF_FLOAT16_MATH
      // float16 sums of P V for a row only where none of the V rows it sees could overflow one
      // (inf and NaN fail the test too).
      uint v_bits = v_abs_max_bits[V_TILE_BITS];
      if (masked_tile) {
        v_bits = 0;
        for (uint c = visible_first[r]; c < visible_end[r]; ++c) v_bits = max(v_bits, v_abs_max_bits[c]);
      }
      pv_in_float16[r] = v_bits < FLOAT16_PARTIAL_SAFE_BITS;
#else
      pv_in_float16[r] = false;
#endif
    }

    float s[ROWS_PER_THREAD][KEYS_PER_THREAD];
    scores(s);
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      if (scores_modified()) {
        [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j)
          s[r][j] = score_mod(s[r][j], modifiers, q_begin + row0 + r, kv_begin + lane + j * THREADS_PER_ROW, q_len, kv_len);
      }
      if (masked_tile) {
        [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j)
          if (lane + j * THREADS_PER_ROW < visible_first[r] || lane + j * THREADS_PER_ROW >= visible_end[r]) s[r][j] = NEG_INF;
      }
    }

    // Online softmax per row: new running max, P = exp2(S - m_new), rescale what was accumulated.
    // With float16 P, the tile stores P relative to its own largest score (tile_scale[r] = that
    // P): a row's P of this tile far below its running max or its sink would lose its bits in
    // float16 (below 2^-14) though its sum carries O; the largest stored P is 1.
    float tile_scale[ROWS_PER_THREAD];
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      float tile_max = NEG_INF;
      [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) tile_max = max(tile_max, s[r][j]);
      tile_max = row_max(tile_max);
      const float m_new = max(m[r], tile_max);
      const float m_ref = m_new == NEG_INF ? 0.0 : m_new;  // row saw no key yet: keeps exp2 off NaN
      const float alpha = exp2(m[r] - m_ref);               // 0 when m_old = -inf
#if VKF_FLOAT16_MATH
      const float stored_ref = tile_max == NEG_INF ? m_ref : tile_max;  // the row sees none of the tile: P = 0
      tile_scale[r] = exp2(stored_ref - m_ref);
#else
      const float stored_ref = m_ref;
      tile_scale[r] = 1.0;
#endif
      float tile_sum = 0.0;
      [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) {
        const float stored_p = exp2(s[r][j] - stored_ref);
        p_tile[(row0 + r) * P_STRIDE + lane + j * THREADS_PER_ROW] = p_t(stored_p);
        tile_sum += stored_p * tile_scale[r];  // P = exp2(S - m_new)
      }
      precise float scaled_l = l[r] * alpha;
      precise float scale_error = fma(l[r], alpha, -scaled_l);  // exact where fma is fused
      float add_error;
      two_sum(scaled_l, tile_sum, l[r], add_error);
      l_error[r] = l_error[r] * alpha + (scale_error + add_error);
      [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) acc[r][i] *= alpha;
      m[r] = m_new;
    }
    barrier();  // P visible; every invocation has read this step's maxima
#if VKF_FLOAT16_MATH
    // Zeroed for the next step's staging, which comes after a barrier.
    for (uint i = tid; i < VKF_SMEM_TILED_ABS_MAX_UINTS(BLOCK_KV); i += WORKGROUP_SIZE) v_abs_max_bits[i] = 0;
#endif

    // Two copies: tiles inside the band run without the per-row key limits.
    if (masked_tile) {
      add_pv(acc, pv_in_float16, tile_scale, true, visible_first, visible_end);
    } else {
      add_pv(acc, pv_in_float16, tile_scale, false, visible_first, visible_end);
    }
    barrier();  // everyone is done with K, V and P before the next step overwrites them
  }

  if (CHUNKED && pc.chunk_end < pc.kv_len) {  // more chunks follow (for the longest sequence): keep the state
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      const uint q_row = q_begin + row0 + r;
      if (q_row >= q_len) continue;
      const uint row_index = (batch * pc.q_heads + head) * pc.q_len + q_row;
      [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) o_state[row_index * HEAD_VEC4 + acc_column(i)] = acc[r][i];
      if (lane == 0) row_state[row_index * ROW_STATE_FLOATS] = m[r];
      row_state[row_index * ROW_STATE_FLOATS + 1 + lane] = l[r];
      row_state[row_index * ROW_STATE_FLOATS + 1 + THREADS_PER_ROW + lane] = l_error[r];
    }
    return;
  }

  // Epilogue: O = acc / l, LSE = ln(l) + m. A row that saw no key: O = 0, LSE = -inf; a NaN score
  // made l NaN, and then O and LSE are NaN.
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    const float row_l = row_sum_compensated(l[r], l_error[r]);
    const uint q_row = q_begin + row0 + r;
    if (q_row >= q_len) continue;
    const float inv_l = row_l == 0.0 ? 0.0 : 1.0 / row_l;
    const uint out_base = tensor_base(VKF_TENSOR_O, batch, head, seq.q_row0) + q_row * tensor_row_stride(VKF_TENSOR_O);
    [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) store_o4(out_base, acc_column(i), acc[r][i] * inv_l);
    if (WRITE_LSE && lane == 0) {
      lse_data[lse_index(batch, head, seq, q_row)] = row_l == 0.0 ? NEG_INF : (m[r] + log2(row_l)) * LN2;
    }
  }
}
