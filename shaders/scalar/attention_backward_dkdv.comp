// FlashAttention-2 backward, dK and dV: one workgroup per (tile of BLOCK_KV keys, kv head,
// batch). Its K and V rows stay in shared memory while the Q / dO tiles that can see them stream
// through: for every query head of the GQA group, every Q tile whose rows see some of its keys.
// P is recomputed from Q, K and the forward's LSE; no N x N buffer exists anywhere.
//   P^T = exp(scale K Q^T - LSE)   dV += P^T dO
//   dP^T = V dO^T                  dS^T = P^T * (dP^T - delta)   dK += scale dS^T Q
// Each key row's gradients are summed by one workgroup in a fixed order: deterministic, no atomics.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#define VKF_DEFAULT_HEAD_DIM 64
#define VKF_DEFAULT_BLOCK_Q 16  // query rows per streamed tile
#define VKF_DEFAULT_BLOCK_KV 8  // key rows this workgroup owns
#define VKF_DEFAULT_THREADS_PER_ROW 8
#include "common/attention_preamble.glsl"  // WORKGROUP_SIZE == BLOCK_KV * THREADS_PER_ROW
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_CHUNKED) const bool CHUNKED = false;  // false: one pass over all steps

const uint HEAD_VEC4 = VKF_HEAD_VEC4(HEAD_DIM);
const uint Q_STRIDE = VKF_ODD_STRIDE(HEAD_VEC4);  // lanes reading different query rows hit different banks
const uint VEC4_PER_THREAD = (HEAD_VEC4 + THREADS_PER_ROW - 1) / THREADS_PER_ROW;

#include "scalar/tensor_io.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_BWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_BWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_BWD_BINDING_MASK_TILES
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"

VKF_TENSOR_IN(VKF_BWD_BINDING_Q, q_data);
VKF_TENSOR_IN(VKF_BWD_BINDING_K, k_data);
VKF_TENSOR_IN(VKF_BWD_BINDING_V, v_data);
VKF_TENSOR_IN(VKF_BWD_BINDING_DO, do_data);
VKF_TENSOR_OUT(VKF_BWD_BINDING_DK, dk_data);
VKF_TENSOR_OUT(VKF_BWD_BINDING_DV, dv_data);
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DK_STATE) buffer dk_state_block { float dk_state[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DV_STATE) buffer dv_state_block { float dv_state[]; };

#include "common/backward_rows.glsl"

VKF_DEFINE_VEC4_LOADER(load_q4, q_data)
VKF_DEFINE_VEC4_LOADER(load_k4, k_data)
VKF_DEFINE_VEC4_LOADER(load_v4, v_data)
VKF_DEFINE_VEC4_LOADER(load_do4, do_data)
VKF_DEFINE_VEC4_STORER(store_dk4, dk_data)
VKF_DEFINE_VEC4_STORER(store_dv4, dv_data)
VKF_DEFINE_STATE_ACCESS(load_dk_state4, store_dk_state4, dk_state)
VKF_DEFINE_STATE_ACCESS(load_dv_state4, store_dv_state4, dv_state)

shared vec4 k_rows[VKF_SMEM_OWNED_VEC4S(BLOCK_KV, HEAD_VEC4)];
shared vec4 v_rows[VKF_SMEM_OWNED_VEC4S(BLOCK_KV, HEAD_VEC4)];
shared vec4 q_tile[VKF_SMEM_STREAMED_VEC4S(BLOCK_Q, Q_STRIDE)];
shared vec4 do_tile[VKF_SMEM_STREAMED_VEC4S(BLOCK_Q, Q_STRIDE)];
shared float lse_tile[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];             // base 2; +inf where P must be 0
shared float delta_tile[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];
shared float pt_tile[VKF_SMEM_SCORE_FLOATS(BLOCK_KV, BLOCK_Q)];  // P^T of the current step
shared float dst_tile[VKF_SMEM_SCORE_FLOATS(BLOCK_KV, BLOCK_Q)]; // dS^T of the current step

void main() {
  const uint tid = gl_LocalInvocationIndex;
  const uint row = tid / THREADS_PER_ROW;   // key row inside the tile
  const uint lane = tid % THREADS_PER_ROW;
  const uint kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_begin = gl_WorkGroupID.x * BLOCK_KV;
  const uint key = kv_begin + row;
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  if (kv_begin >= seq.kv_rows) return;  // past the key rows of this batch entry
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);

  for (uint i = tid; i < BLOCK_KV * HEAD_VEC4; i += WORKGROUP_SIZE) {
    const uint r = i / HEAD_VEC4, d4 = i % HEAD_VEC4;
    const bool inside = kv_begin + r < kv_len;
    k_rows[i] = inside ? load_k4(k_base + (kv_begin + r) * k_stride, d4) : vec4(0.0);
    v_rows[i] = inside ? load_v4(v_base + (kv_begin + r) * v_stride, d4) : vec4(0.0);
  }

  vec4 dk[VEC4_PER_THREAD], dv[VEC4_PER_THREAD];  // this lane's columns: vec4 d4 = lane + k * THREADS_PER_ROW
  for (uint k = 0; k < VEC4_PER_THREAD; ++k) dk[k] = dv[k] = vec4(0.0);
  // Of this key row in dk_state / dv_state ([batch, kv_heads, kv_len, D] for the longest sequence).
  const uint state_base = ((batch * pc.kv_heads + kv_head) * pc.kv_len + key) * HEAD_DIM;
  if (CHUNKED && pc.chunk_begin > 0 && key < kv_len) {  // the sums of the earlier chunks
    for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
      dk[k] = load_dk_state4(state_base, lane + k * THREADS_PER_ROW);
      dv[k] = load_dv_state4(state_base, lane + k * THREADS_PER_ROW);
    }
  }
  // Queries [key_rows, key_rows_stop) see this key.
  const uint key_rows = key_rows_begin(key, q_len, kv_len), key_rows_stop = key_rows_end(key, q_len, kv_len);

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
      barrier();  // the previous step's tiles are no longer read (first step: K/V rows visible)
      for (uint i = tid; i < BLOCK_Q * HEAD_VEC4; i += WORKGROUP_SIZE) {
        const uint r = i / HEAD_VEC4, d4 = i % HEAD_VEC4;
        const bool inside = q_begin + r < q_len;
        q_tile[r * Q_STRIDE + d4] = inside ? load_q4(q_base + (q_begin + r) * q_stride, d4) : vec4(0.0);
        do_tile[r * Q_STRIDE + d4] = inside ? load_do4(do_base + (q_begin + r) * do_stride, d4) : vec4(0.0);
      }
      for (uint i = tid; i < BLOCK_Q; i += WORKGROUP_SIZE) {
        const uint row_index = lse_index(batch, head, seq, q_begin + i);
        lse_tile[i] = row_lse_log2(row_index, q_begin + i, q_len);
        delta_tile[i] = row_delta(row_index, q_begin + i, q_len);
      }
      barrier();

      // P^T and dS^T for this lane's query rows c = lane, lane + THREADS_PER_ROW, ...
      const bool masked_tile = tile_needs_mask(q_begin, BLOCK_Q, kv_begin, BLOCK_KV, q_len, kv_len);
      for (uint c = lane; c < BLOCK_Q; c += THREADS_PER_ROW) {
        float s = 0.0, dp = 0.0;
        [[dont_unroll]] for (uint d4 = 0; d4 < HEAD_VEC4; ++d4) {
          s += dot(k_rows[row * HEAD_VEC4 + d4], q_tile[c * Q_STRIDE + d4]);
          dp += dot(v_rows[row * HEAD_VEC4 + d4], do_tile[c * Q_STRIDE + d4]);
        }
        // A masked pair's P and dS are 0 whatever dP is (an inf in dO would make P (dP - delta) NaN).
        const bool visible = !masked_tile || key_visible(q_begin + c, key, q_len, kv_len);
        const float t = s * pc.scale_log2;
        const float p = visible ? pair_p(t, lse_tile[c], modifiers, q_begin + c, key, q_len, kv_len) : 0.0;
        pt_tile[row * BLOCK_Q + c] = p;
        dst_tile[row * BLOCK_Q + c] = visible ? p * (dp - delta_tile[c]) * score_mod_derivative(t) : 0.0;
      }
      barrier();

      // dV += P^T dO, dK += dS^T Q (scaled once at the end), over the queries that see the key
      // only: 0 x inf is NaN.
      const uint c_begin = masked_tile ? min(BLOCK_Q, uint(max(int(key_rows) - int(q_begin), 0))) : 0;
      const uint c_end = masked_tile ? min(BLOCK_Q, uint(max(int(key_rows_stop) - int(q_begin), 0)))
                                     : min(BLOCK_Q, q_len - q_begin);
      for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
        const uint d4 = lane + k * THREADS_PER_ROW;
        if (d4 < HEAD_VEC4) {
          [[dont_unroll]] for (uint c = c_begin; c < c_end; ++c) {
            dv[k] += pt_tile[row * BLOCK_Q + c] * do_tile[c * Q_STRIDE + d4];
            dk[k] += dst_tile[row * BLOCK_Q + c] * q_tile[c * Q_STRIDE + d4];
          }
        }
      }
    }
  }

  if (CHUNKED && pc.chunk_end < group * q_tiles) {  // more chunks follow: keep the sums
    if (key < kv_len) {
      for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
        store_dk_state4(state_base, lane + k * THREADS_PER_ROW, dk[k]);
        store_dv_state4(state_base, lane + k * THREADS_PER_ROW, dv[k]);
      }
    }
    return;
  }
  if (key < seq.kv_rows) {  // keys past kv_len: zeros
    const uint dk_at = k_base + key * k_stride, dv_at = v_base + key * v_stride;
    const float scale = pc.scale_log2 / LOG2E;
    for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
      const uint d4 = lane + k * THREADS_PER_ROW;
      if (d4 < HEAD_VEC4) {
        store_dk4(dk_at, d4, dk[k] * scale);
        store_dv4(dv_at, d4, dv[k]);
      }
    }
  }
}
