// FlashAttention-2 backward, dK and dV, scalar (no tensor cores), register-tiled: one workgroup
// per (tile of BLOCK_KV keys, kv head, batch), the same steps and sums as
// scalar/attention_backward_dkdv.comp, built for throughput.
//
// The workgroup's keys are split into key groups of ROWS_PER_THREAD keys; the THREADS_PER_ROW
// invocations of a group (consecutive, aligned) each own a register block of S^T and dP^T (its
// keys x the step's queries lane, lane + THREADS_PER_ROW, ...) and of dK and dV (its keys x every
// THREADS_PER_ROW-th word of the head dim). K and V stay in shared memory; Q and dO of each step
// are staged together; P^T and dS^T go through shared memory from the invocations that computed
// them to those that own the dK and dV columns. Every product and sum is float32; float16
// tensors stay halves in shared memory (VKF_HALF_WORDS), widened where read.
//
// The engine picks this kernel for views at 16-byte offsets with strides and head dim multiples of
// 8 elements, ROWS_PER_THREAD = BLOCK_KV * THREADS_PER_ROW / WORKGROUP_SIZE whole, and
// THREADS_PER_ROW dividing both BLOCK_Q and the words of a row; other calls run the per-row kernel.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#define VKF_DEFAULT_HEAD_DIM 64
#define VKF_DEFAULT_BLOCK_Q 32   // query rows per streamed tile
#define VKF_DEFAULT_BLOCK_KV 32  // key rows this workgroup owns
#define VKF_DEFAULT_THREADS_PER_ROW 8
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_CHUNKED) const bool CHUNKED = false;  // false: one pass over all steps

#include "scalar/tensor_io.glsl"
#include "scalar/register_tile.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_BWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_BWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_BWD_BINDING_MASK_TILES
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"

const uint ROWS_PER_THREAD = BLOCK_KV * THREADS_PER_ROW / WORKGROUP_SIZE;  // keys per invocation
const uint QUERIES_PER_THREAD = BLOCK_Q / THREADS_PER_ROW;
const uint ROW_WORDS = VKF_TILED_ROW_WORDS(HEAD_DIM, WORD_COLS);
const uint STRIDE = VKF_ODD_STRIDE(ROW_WORDS);
const uint GLOBAL_ROW_WORDS = HEAD_DIM / GLOBAL_COLS;
const uint WORDS_PER_THREAD = ROW_WORDS / THREADS_PER_ROW;  // of dK, dV: words lane, lane + THREADS_PER_ROW, ...
const uint VEC4_PER_THREAD = WORDS_PER_THREAD * WORD_VEC4S;  // ...as vec4 accumulators
#include "scalar/score_tile.glsl"

VKF_TENSOR_WORDS_IN(VKF_BWD_BINDING_Q, q_data);
VKF_TENSOR_WORDS_IN(VKF_BWD_BINDING_K, k_data);
VKF_TENSOR_WORDS_IN(VKF_BWD_BINDING_V, v_data);
VKF_TENSOR_WORDS_IN(VKF_BWD_BINDING_DO, do_data);
VKF_TENSOR_OUT(VKF_BWD_BINDING_DK, dk_data);
VKF_TENSOR_OUT(VKF_BWD_BINDING_DV, dv_data);
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DK_STATE) buffer dk_state_block { float dk_state[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DV_STATE) buffer dv_state_block { float dv_state[]; };

#include "common/backward_rows.glsl"

VKF_DEFINE_VEC4_STORER(store_dk4, dk_data)
VKF_DEFINE_VEC4_STORER(store_dv4, dv_data)
VKF_DEFINE_STATE_ACCESS(load_dk_state4, store_dk_state4, dk_state)
VKF_DEFINE_STATE_ACCESS(load_dv_state4, store_dv_state4, dv_state)

shared word_t k_tile[VKF_SMEM_TILED_WORDS(BLOCK_KV, STRIDE)];
shared word_t v_tile[VKF_SMEM_TILED_WORDS(BLOCK_KV, STRIDE)];
shared word_t q_tile[VKF_SMEM_TILED_WORDS(BLOCK_Q, STRIDE)];
shared word_t do_tile[VKF_SMEM_TILED_WORDS(BLOCK_Q, STRIDE)];
shared float lse_tile[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];  // base 2; +inf where P must be 0
shared float delta_tile[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];
VKF_DEFINE_SCORE_TILE(pt_tile, BLOCK_KV, BLOCK_Q)   // P^T of the step
VKF_DEFINE_SCORE_TILE(dst_tile, BLOCK_KV, BLOCK_Q)  // dS^T of the step

VKF_DEFINE_PAIR_STAGER(stage_kv, k_tile, k_data, VKF_STAGE_WORD, STRIDE, WORDS_PER_GLOBAL, v_tile, v_data, false, BLOCK_KV)
VKF_DEFINE_PAIR_STAGER(stage_q_do, q_tile, q_data, VKF_STAGE_WORD, STRIDE, WORDS_PER_GLOBAL, do_tile, do_data, false,
                       BLOCK_Q)

// Query row q_row's LSE (base 2; +inf where P must be 0) and delta.
void read_row_terms(uint batch, uint head, Sequence seq, uint q_row, uint q_len, out float lse, out float delta) {
  const uint row_index = lse_index(batch, head, seq, q_row);
  lse = row_lse_log2(row_index, q_row, q_len);
  delta = row_delta(row_index, q_row, q_len);
}

uint group_first_key() { return (gl_LocalInvocationIndex / THREADS_PER_ROW) * ROWS_PER_THREAD; }
uint lane_id() { return gl_LocalInvocationIndex % THREADS_PER_ROW; }

// P^T and dS^T of this invocation's keys x queries lane + j * THREADS_PER_ROW of the staged step,
// into pt_tile and dst_tile. A pair the mask hides gets 0 whatever dP is (an inf in dO would make
// P (dP - delta) NaN).
void scores_and_gradients(uint q_begin, uint kv_begin, uint q_len, uint kv_len, bool masked_tile, ScoreHead modifiers) {
  const uint key0 = group_first_key(), lane = lane_id();
  float s[ROWS_PER_THREAD][QUERIES_PER_THREAD], dp[ROWS_PER_THREAD][QUERIES_PER_THREAD];
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r)
    [[unroll]] for (uint j = 0; j < QUERIES_PER_THREAD; ++j) s[r][j] = dp[r][j] = 0.0;
  for (uint w = 0; w < ROW_WORDS; ++w) {
    vec4 kx[ROWS_PER_THREAD][WORD_VEC4S], vx[ROWS_PER_THREAD][WORD_VEC4S];
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      word_to_f32(k_tile[(key0 + r) * STRIDE + w], kx[r]);
      word_to_f32(v_tile[(key0 + r) * STRIDE + w], vx[r]);
    }
    [[unroll]] for (uint j = 0; j < QUERIES_PER_THREAD; ++j) {
      vec4 qx[WORD_VEC4S], dox[WORD_VEC4S];
      word_to_f32(q_tile[(lane + j * THREADS_PER_ROW) * STRIDE + w], qx);
      word_to_f32(do_tile[(lane + j * THREADS_PER_ROW) * STRIDE + w], dox);
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
        s[r][j] = word_dot_add(s[r][j], kx[r], qx);
        dp[r][j] = word_dot_add(dp[r][j], vx[r], dox);
      }
    }
  }
  [[unroll]] for (uint j = 0; j < QUERIES_PER_THREAD; ++j) {
    const uint c = lane + j * THREADS_PER_ROW;
    float p[ROWS_PER_THREAD], ds[ROWS_PER_THREAD];
    [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
      const bool visible = !masked_tile || key_visible(q_begin + c, kv_begin + key0 + r, q_len, kv_len);
      const float t = s[r][j] * pc.scale_log2;
      p[r] = visible ? pair_p(t, lse_tile[c], modifiers, q_begin + c, kv_begin + key0 + r, q_len, kv_len) : 0.0;
      ds[r] = visible ? p[r] * (dp[r][j] - delta_tile[c]) * score_mod_derivative(t) : 0.0;
    }
    pt_tile_store(key0, c, p);
    dst_tile_store(key0, c, ds);
  }
}

// dV += P^T dO, dK += dS^T Q (scaled once at the end) over the step's queries [0, c_end); with
// `masked`, key r takes only queries [first_query[r], query_stop[r]), those that see it (0 x inf
// is NaN: common/nonfinite.glsl).
void add_gradients(inout vec4 dk[ROWS_PER_THREAD][VEC4_PER_THREAD], inout vec4 dv[ROWS_PER_THREAD][VEC4_PER_THREAD],
                   uint c_end, bool masked, uint first_query[ROWS_PER_THREAD], uint query_stop[ROWS_PER_THREAD]) {
  const uint key0 = group_first_key(), lane = lane_id();
  for (uint c = 0; c < c_end; ++c) {
    float p[ROWS_PER_THREAD], ds[ROWS_PER_THREAD];
    pt_tile_load(key0, c, p);
    dst_tile_load(key0, c, ds);
    [[unroll]] for (uint k = 0; k < WORDS_PER_THREAD; ++k) {
      vec4 dox[WORD_VEC4S], qx[WORD_VEC4S];
      word_to_f32(do_tile[c * STRIDE + lane + k * THREADS_PER_ROW], dox);
      word_to_f32(q_tile[c * STRIDE + lane + k * THREADS_PER_ROW], qx);
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
        if (masked && (c < first_query[r] || c >= query_stop[r])) continue;
        [[unroll]] for (uint h = 0; h < WORD_VEC4S; ++h) {
          dv[r][k * WORD_VEC4S + h] += p[r] * dox[h];
          dk[r][k * WORD_VEC4S + h] += ds[r] * qx[h];
        }
      }
    }
  }
}

void main() {
  const uint key0 = group_first_key(), lane = lane_id();
  const uint kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_begin = gl_WorkGroupID.x * BLOCK_KV;
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  if (kv_begin >= seq.kv_rows) return;  // past the key rows of this batch entry
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);
  stage_kv(k_base, k_stride, v_base, v_stride, kv_begin, kv_len);

  // This invocation's keys: their columns of dK and dV (vec4 i at column word_vec4_column(i)),
  // and the queries that see each, [key_rows[r], key_rows_stop[r]).
  vec4 dk[ROWS_PER_THREAD][VEC4_PER_THREAD], dv[ROWS_PER_THREAD][VEC4_PER_THREAD];
  uint key_rows[ROWS_PER_THREAD], key_rows_stop[ROWS_PER_THREAD];
  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    const uint key = kv_begin + key0 + r;
    key_rows[r] = key_rows_begin(key, q_len, kv_len);
    key_rows_stop[r] = key_rows_end(key, q_len, kv_len);
    [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) dk[r][i] = dv[r][i] = vec4(0.0);
    if (CHUNKED && pc.chunk_begin > 0 && key < kv_len) {  // the sums of the earlier chunks
      // Of this key row in dk_state / dv_state ([batch, kv_heads, kv_len, D] for the longest sequence).
      const uint state_base = ((batch * pc.kv_heads + kv_head) * pc.kv_len + key) * HEAD_DIM;
      [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) {
        dk[r][i] = load_dk_state4(state_base, word_vec4_column(lane, THREADS_PER_ROW, i));
        dv[r][i] = load_dv_state4(state_base, word_vec4_column(lane, THREADS_PER_ROW, i));
      }
    }
  }

  // Query rows outside [q_first, q_stop) see none of this tile's keys (the band): their tiles are
  // skipped. The steps are the query tiles of each head of the group, head-major; a chunk takes
  // its own range.
  const uint q_first = visible_q_begin(kv_begin, q_len, kv_len);
  const uint q_stop = visible_q_end(kv_begin, BLOCK_KV, q_len, kv_len);
  const uint group = pc.q_heads / pc.kv_heads;
  // Steps are counted with the longest sequence's tiles (the chunks' unit); this sequence's stop
  // at its own, and a tile of keys it does not attend to (its dK and dV are zeros) has none.
  const uint q_tiles = (pc.q_len + BLOCK_Q - 1) / BLOCK_Q;
  const uint own_q_tiles = kv_begin < kv_len ? (q_len + BLOCK_Q - 1) / BLOCK_Q : 0;
  const uint step_begin = CHUNKED ? pc.chunk_begin : 0, step_end = CHUNKED ? pc.chunk_end : group * q_tiles;
  const uint heads_end = q_tiles == 0 ? 0 : min(group, (step_end + q_tiles - 1) / q_tiles);  // no queries: none
  for (uint h = q_tiles == 0 ? 0 : step_begin / q_tiles; h < heads_end; ++h) {
    const uint head = kv_head * group + h;
    const ScoreHead modifiers = score_head(batch, head);
    const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes
    const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0), q_stride = tensor_row_stride(VKF_TENSOR_Q);
    const uint do_base = tensor_base(VKF_TENSOR_DO, batch, head, seq.q_row0), do_stride = tensor_row_stride(VKF_TENSOR_DO);
    const uint tile_begin = max(q_first / BLOCK_Q, step_begin > h * q_tiles ? step_begin - h * q_tiles : 0);
    const uint tile_end = min(min(own_q_tiles, (q_stop + BLOCK_Q - 1) / BLOCK_Q), step_end - h * q_tiles);
    MaskWalk closed_rows = mask_walk();  // the tiles the mask closes, read as the loop goes
    for (uint q_begin = tile_begin * BLOCK_Q; q_begin < tile_end * BLOCK_Q; q_begin += BLOCK_Q) {
      if (mask_closes_rows(closed_rows, mask_summary, q_begin, min(q_begin + BLOCK_Q, q_len), kv_begin,
                           min(kv_begin + BLOCK_KV, kv_len))) {
        continue;
      }
      barrier();  // the previous step's tiles are no longer read (first step: K and V staged)
      // This invocation's row of the tile: its LSE and delta read before Q and dO are staged and
      // stored after, so that all these reads are in flight together.
      const uint own_row = gl_LocalInvocationIndex;
      float own_lse = 0.0, own_delta = 0.0;
      if (own_row < BLOCK_Q) read_row_terms(batch, head, seq, q_begin + own_row, q_len, own_lse, own_delta);
      stage_q_do(q_base, q_stride, do_base, do_stride, q_begin, q_len);
      if (own_row < BLOCK_Q) {
        lse_tile[own_row] = own_lse;
        delta_tile[own_row] = own_delta;
      }
      for (uint i = own_row + WORKGROUP_SIZE; i < BLOCK_Q; i += WORKGROUP_SIZE)  // tiles of more rows than invocations
        read_row_terms(batch, head, seq, q_begin + i, q_len, lse_tile[i], delta_tile[i]);
      barrier();

      const bool masked_tile = tile_needs_mask(q_begin, BLOCK_Q, kv_begin, BLOCK_KV, q_len, kv_len);
      scores_and_gradients(q_begin, kv_begin, q_len, kv_len, masked_tile, modifiers);
      barrier();  // P^T and dS^T visible

      const uint c_end = min(BLOCK_Q, q_len - q_begin);
      uint first_query[ROWS_PER_THREAD], query_stop[ROWS_PER_THREAD];
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
        first_query[r] = min(BLOCK_Q, uint(max(int(key_rows[r]) - int(q_begin), 0)));
        query_stop[r] = WINDOW_LEFT ? min(BLOCK_Q, uint(max(int(key_rows_stop[r]) - int(q_begin), 0))) : BLOCK_Q;
      }
      // Two copies: tiles inside the band run without the per-key query limits.
      if (masked_tile) {
        add_gradients(dk, dv, c_end, true, first_query, query_stop);
      } else {
        add_gradients(dk, dv, c_end, false, first_query, query_stop);
      }
    }
  }

  [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) {
    const uint key = kv_begin + key0 + r;
    if (CHUNKED && pc.chunk_end < group * q_tiles) {  // more chunks follow: keep the sums
      if (key >= kv_len) continue;
      const uint state_base = ((batch * pc.kv_heads + kv_head) * pc.kv_len + key) * HEAD_DIM;
      [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) {
        store_dk_state4(state_base, word_vec4_column(lane, THREADS_PER_ROW, i), dk[r][i]);
        store_dv_state4(state_base, word_vec4_column(lane, THREADS_PER_ROW, i), dv[r][i]);
      }
      continue;
    }
    if (key >= seq.kv_rows) continue;  // keys past kv_len (below kv_rows): zeros
    const uint dk_at = k_base + key * k_stride, dv_at = v_base + key * v_stride;
    const float scale = pc.scale_log2 / LOG2E;
    [[unroll]] for (uint i = 0; i < VEC4_PER_THREAD; ++i) {
      store_dk4(dk_at, word_vec4_column(lane, THREADS_PER_ROW, i), dk[r][i] * scale);
      store_dv4(dv_at, word_vec4_column(lane, THREADS_PER_ROW, i), dv[r][i]);
    }
  }
}
