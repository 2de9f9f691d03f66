// FlashAttention-2 backward, dQ, scalar (no tensor cores), register-tiled: one workgroup per (tile
// of BLOCK_Q query rows, head, batch), the same steps and sums as scalar/attention_backward_dq.comp,
// built for throughput.
//
// The workgroup's rows are split into row groups of ROWS_PER_THREAD rows; the THREADS_PER_ROW
// invocations of a group (consecutive, aligned) each own a register block of S and dP (its rows x
// the step's keys lane, lane + THREADS_PER_ROW, ...) and of dQ (its rows x every
// THREADS_PER_ROW-th word of the head dim). Q and dO stay in shared memory; K and V of each key
// tile are staged together; dS goes through shared memory from the invocations that computed it to
// those that own the dQ columns. Every product and sum is float32; float16 tensors stay halves in
// shared memory (VKF_HALF_WORDS), widened where read.
//
// The engine picks this kernel for views at 16-byte offsets with strides and head dim multiples of
// 8 elements, ROWS_PER_THREAD = BLOCK_Q * THREADS_PER_ROW / WORKGROUP_SIZE whole, and
// THREADS_PER_ROW dividing both BLOCK_KV and the words of a row; other calls run the per-row kernel.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#define VKF_DEFAULT_HEAD_DIM 64
#define VKF_DEFAULT_BLOCK_Q 32   // query rows this workgroup owns
#define VKF_DEFAULT_BLOCK_KV 32  // key rows per streamed tile
#define VKF_DEFAULT_THREADS_PER_ROW 8
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_CHUNKED) const bool CHUNKED = false;  // false: one pass over all keys

#include "scalar/tensor_io.glsl"
#include "scalar/register_tile.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_BWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_BWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_BWD_BINDING_MASK_TILES
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"

const uint ROWS_PER_THREAD = BLOCK_Q * THREADS_PER_ROW / WORKGROUP_SIZE;
const uint KEYS_PER_THREAD = BLOCK_KV / THREADS_PER_ROW;
const uint ROW_WORDS = VKF_TILED_ROW_WORDS(HEAD_DIM, WORD_COLS);
const uint STRIDE = VKF_ODD_STRIDE(ROW_WORDS);
const uint GLOBAL_ROW_WORDS = HEAD_DIM / GLOBAL_COLS;
const uint WORDS_PER_THREAD = ROW_WORDS / THREADS_PER_ROW;  // of dQ: words lane, lane + THREADS_PER_ROW, ...
const uint VEC4_PER_THREAD = WORDS_PER_THREAD * WORD_VEC4S;  // ...as vec4 accumulators
// Words of the head dim per trip of S and dP's loop, unrolled by hand: the driver does not unroll a
// loop whose trip count is a specialization constant.
const uint WORDS_PER_TRIP = VKF_TILED_DQ_WORDS_PER_TRIP;
#include "scalar/score_tile.glsl"

VKF_TENSOR_WORDS_IN(VKF_BWD_BINDING_Q, q_data);
VKF_TENSOR_WORDS_IN(VKF_BWD_BINDING_K, k_data);
VKF_TENSOR_WORDS_IN(VKF_BWD_BINDING_V, v_data);
VKF_TENSOR_WORDS_IN(VKF_BWD_BINDING_DO, do_data);
VKF_TENSOR_OUT(VKF_BWD_BINDING_DQ, dq_data);
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ_STATE) buffer dq_state_block { float dq_state[]; };

#include "common/backward_rows.glsl"

VKF_DEFINE_VEC4_STORER(store_dq4, dq_data)
VKF_DEFINE_STATE_ACCESS(load_state4, store_state4, dq_state)

shared word_t q_tile[VKF_SMEM_TILED_WORDS(BLOCK_Q, STRIDE)];
shared word_t do_tile[VKF_SMEM_TILED_WORDS(BLOCK_Q, STRIDE)];
shared word_t k_tile[VKF_SMEM_TILED_WORDS(BLOCK_KV, STRIDE)];
shared word_t v_tile[VKF_SMEM_TILED_WORDS(BLOCK_KV, STRIDE)];
VKF_DEFINE_SCORE_TILE(ds_tile, BLOCK_Q, BLOCK_KV)  // dS of the step

VKF_DEFINE_PAIR_STAGER(stage_q_do, q_tile, q_data, VKF_STAGE_WORD, STRIDE, WORDS_PER_GLOBAL, do_tile, do_data, false,
                       BLOCK_Q)
VKF_DEFINE_PAIR_STAGER(stage_kv, k_tile, k_data, VKF_STAGE_WORD, STRIDE, WORDS_PER_GLOBAL, v_tile, v_data, false, BLOCK_KV)

uint row_group_first_row() { return (gl_LocalInvocationIndex / THREADS_PER_ROW) * ROWS_PER_THREAD; }
uint lane_id() { return gl_LocalInvocationIndex % THREADS_PER_ROW; }

// S += Q K^T and dP += dO V^T over word w of the head dim, for this invocation's rows x keys lane +
// j * THREADS_PER_ROW of the staged tile.
void add_word_products(uint w, uint row0, uint lane, inout float s[ROWS_PER_THREAD][KEYS_PER_THREAD],
                       inout float dp[ROWS_PER_THREAD][KEYS_PER_THREAD]) {
  vec4 qx[ROWS_PER_THREAD][WORD_VEC4S], dox[ROWS_PER_THREAD][WORD_VEC4S];
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    word_to_f32(q_tile[(row0 + r) * STRIDE + w], qx[r]);
    word_to_f32(do_tile[(row0 + r) * STRIDE + w], dox[r]);
  }
  [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) {
    vec4 kx[WORD_VEC4S], vx[WORD_VEC4S];
    word_to_f32(k_tile[(lane + j * THREADS_PER_ROW) * STRIDE + w], kx);
    word_to_f32(v_tile[(lane + j * THREADS_PER_ROW) * STRIDE + w], vx);
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      s[r][j] = word_dot_add(s[r][j], qx[r], kx);
      dp[r][j] = word_dot_add(dp[r][j], dox[r], vx);
    }
  }
}

// dS of this invocation's rows x keys lane + j * THREADS_PER_ROW of the staged tile, into ds_tile.
// A pair the mask hides gets 0 whatever dP is (an inf in V would make P (dP - delta) NaN).
void score_gradients(uint q_begin, uint kv_begin, uint q_len, uint kv_len, bool masked_tile,
                     float lse[ROWS_PER_THREAD], float delta[ROWS_PER_THREAD], ScoreHead modifiers) {
  const uint row0 = row_group_first_row(), lane = lane_id();
  float s[ROWS_PER_THREAD][KEYS_PER_THREAD], dp[ROWS_PER_THREAD][KEYS_PER_THREAD];
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r)
    [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) s[r][j] = dp[r][j] = 0.0;
  uint w = 0;
  for (; w + WORDS_PER_TRIP <= ROW_WORDS; w += WORDS_PER_TRIP) {
    [[unroll]] for (uint i = 0; i < WORDS_PER_TRIP; ++i) add_word_products(w + i, row0, lane, s, dp);
  }
  for (; w < ROW_WORDS; ++w) add_word_products(w, row0, lane, s, dp);
  [[unroll]] for (uint j = 0; j < KEYS_PER_THREAD; ++j) {
    const uint c = lane + j * THREADS_PER_ROW;
    float ds[ROWS_PER_THREAD];
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      const bool visible = !masked_tile || key_visible(q_begin + row0 + r, kv_begin + c, q_len, kv_len);
      const float t = s[r][j] * pc.scale_log2;
      ds[r] = visible ? pair_p(t, lse[r], modifiers, q_begin + row0 + r, kv_begin + c, q_len, kv_len) * (dp[r][j] - delta[r]) *
                            score_mod_derivative(t)
                      : 0.0;
    }
    ds_tile_store(row0, c, ds);
  }
}

// dQ += dS K (scaled once at the end) over the tile's keys [0, c_end); with `masked`, row r takes
// only the keys [visible_first[r], visible_end[r]) it sees (0 x inf is NaN: common/nonfinite.glsl).
void add_dq(inout vec4 dq[ROWS_PER_THREAD][VEC4_PER_THREAD], uint c_end, bool masked,
            uint visible_first[ROWS_PER_THREAD], uint visible_end[ROWS_PER_THREAD]) {
  const uint row0 = row_group_first_row(), lane = lane_id();
  for (uint c = 0; c < c_end; ++c) {
    float ds[ROWS_PER_THREAD];
    ds_tile_load(row0, c, ds);
    [[unroll]] for (uint k = 0; k < WORDS_PER_THREAD; ++k) {
      vec4 kx[WORD_VEC4S];
      word_to_f32(k_tile[c * STRIDE + lane + k * THREADS_PER_ROW], kx);
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
        if (masked && (c < visible_first[r] || c >= visible_end[r])) continue;
        [[unroll]] for (uint h = 0; h < WORD_VEC4S; ++h) dq[r][k * WORD_VEC4S + h] += ds[r] * kx[h];
      }
    }
  }
}

void main() {
  const uint row0 = row_group_first_row(), lane = lane_id();
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  if (q_begin >= q_len) return;  // past this batch entry's queries
  const uint q_end = min(q_begin + BLOCK_Q, q_len);
  const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0), q_stride = tensor_row_stride(VKF_TENSOR_Q);
  const uint do_base = tensor_base(VKF_TENSOR_DO, batch, head, seq.q_row0), do_stride = tensor_row_stride(VKF_TENSOR_DO);
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);
  stage_q_do(q_base, q_stride, do_base, do_stride, q_begin, q_len);

  // This invocation's rows: LSE and delta, the keys each sees [row_first_key[r], row_keys[r]),
  // their columns of dQ (vec4 i at column word_vec4_column(i)).
  float lse[ROWS_PER_THREAD], delta[ROWS_PER_THREAD];
  uint row_first_key[ROWS_PER_THREAD], row_keys[ROWS_PER_THREAD];
  vec4 dq[ROWS_PER_THREAD][VEC4_PER_THREAD];
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    const uint q_row = q_begin + row0 + r;
    lse[r] = row_lse_log2(lse_index(batch, head, seq, q_row), q_row, q_len);
    delta[r] = row_delta(lse_index(batch, head, seq, q_row), q_row, q_len);
    row_first_key[r] = row_keys_begin(q_row, q_len, kv_len);
    row_keys[r] = row_keys_end(q_row, q_len, kv_len);
    [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) dq[r][i] = vec4(0.0);
    if (CHUNKED && pc.chunk_begin > 0 && q_row < q_len) {  // the sum of the earlier chunks
      const uint state_base = dq_sum_row(batch, head, q_row) * HEAD_DIM;
      [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i)
        dq[r][i] = load_state4(state_base, word_vec4_column(lane, THREADS_PER_ROW, i));
    }
  }

  const ScoreHead modifiers = score_head(batch, head);
  const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes
  // Tiles wholly outside the rows' band are never visited; a chunk visits its own keys only.
  const uint kv_first = first_visible_kv_tile(q_begin, BLOCK_KV, q_len, kv_len);
  const uint kv_end = CHUNKED ? min(visible_kv_end(q_begin, q_end, q_len, kv_len), pc.chunk_end)
                              : visible_kv_end(q_begin, q_end, q_len, kv_len);
  MaskWalk closed_keys = mask_walk();  // the tiles the mask closes, read as the loop goes
  for (uint kv_begin = CHUNKED ? max(pc.chunk_begin, kv_first) : kv_first; kv_begin < kv_end; kv_begin += BLOCK_KV) {
    if (mask_closes_keys(closed_keys, mask_summary, q_begin, q_end, kv_begin, min(kv_begin + BLOCK_KV, kv_len))) continue;
    barrier();  // the previous step's tiles are no longer read (first step: Q and dO staged)
    stage_kv(k_base, k_stride, v_base, v_stride, kv_begin, kv_len);
    barrier();

    const bool masked_tile = tile_needs_mask(q_begin, BLOCK_Q, kv_begin, BLOCK_KV, q_len, kv_len);
    score_gradients(q_begin, kv_begin, q_len, kv_len, masked_tile, lse, delta, modifiers);
    barrier();  // dS visible

    const uint c_end = min(BLOCK_KV, kv_len - kv_begin);
    uint visible_first[ROWS_PER_THREAD], visible_end[ROWS_PER_THREAD];  // the row's keys of this tile
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      visible_first[r] = WINDOW_LEFT ? uint(clamp(int(row_first_key[r]) - int(kv_begin), 0, int(BLOCK_KV))) : 0u;
      visible_end[r] = uint(clamp(int(row_keys[r]) - int(kv_begin), 0, int(BLOCK_KV)));
    }
    // Two copies: tiles inside the band run without the per-row key limits.
    if (masked_tile) {
      add_dq(dq, c_end, true, visible_first, visible_end);
    } else {
      add_dq(dq, c_end, false, visible_first, visible_end);
    }
  }

  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    const uint q_row = q_begin + row0 + r;
    if (q_row >= q_len) continue;
    if (CHUNKED && pc.chunk_end < pc.kv_len) {  // more chunks follow (for the longest sequence): keep the sum
      const uint state_base = dq_sum_row(batch, head, q_row) * HEAD_DIM;
      [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i)
        store_state4(state_base, word_vec4_column(lane, THREADS_PER_ROW, i), dq[r][i]);
      continue;
    }
    const uint out_base = q_base + q_row * q_stride;  // dQ has Q's strides
    const float scale = pc.scale_log2 / LOG2E;
    [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i)
      store_dq4(out_base, word_vec4_column(lane, THREADS_PER_ROW, i), dq[r][i] * scale);
  }
}
