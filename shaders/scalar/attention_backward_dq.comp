// FlashAttention-2 backward, dQ: one workgroup per (tile of BLOCK_Q query rows, head, batch).
// Q, dO, LSE and delta of its rows stay put while the K / V tiles they can see stream through:
//   P = exp(scale Q K^T - LSE)   dP = dO V^T   dS = P * (dP - delta)   dQ += scale dS K
// Deterministic: each dQ row is summed by one workgroup in a fixed order.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#define VKF_DEFAULT_HEAD_DIM 64
#define VKF_DEFAULT_BLOCK_Q 16   // query rows this workgroup owns
#define VKF_DEFAULT_BLOCK_KV 16  // key rows per streamed tile
#define VKF_DEFAULT_THREADS_PER_ROW 8
#include "common/attention_preamble.glsl"  // WORKGROUP_SIZE == BLOCK_Q * THREADS_PER_ROW
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_CHUNKED) const bool CHUNKED = false;  // false: one pass over all keys

const uint HEAD_VEC4 = VKF_HEAD_VEC4(HEAD_DIM);
const uint KV_STRIDE = VKF_ODD_STRIDE(HEAD_VEC4);
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
VKF_TENSOR_OUT(VKF_BWD_BINDING_DQ, dq_data);
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ_STATE) buffer dq_state_block { float dq_state[]; };

#include "common/backward_rows.glsl"

VKF_DEFINE_VEC4_LOADER(load_q4, q_data)
VKF_DEFINE_VEC4_LOADER(load_k4, k_data)
VKF_DEFINE_VEC4_LOADER(load_v4, v_data)
VKF_DEFINE_VEC4_LOADER(load_do4, do_data)
VKF_DEFINE_VEC4_STORER(store_dq4, dq_data)
VKF_DEFINE_STATE_ACCESS(load_state4, store_state4, dq_state)

shared vec4 q_rows[VKF_SMEM_OWNED_VEC4S(BLOCK_Q, HEAD_VEC4)];
shared vec4 do_rows[VKF_SMEM_OWNED_VEC4S(BLOCK_Q, HEAD_VEC4)];
shared vec4 k_tile[VKF_SMEM_STREAMED_VEC4S(BLOCK_KV, KV_STRIDE)];
shared vec4 v_tile[VKF_SMEM_STREAMED_VEC4S(BLOCK_KV, KV_STRIDE)];
shared float ds_tile[VKF_SMEM_SCORE_FLOATS(BLOCK_Q, BLOCK_KV)];  // dS of the current step

void main() {
  const uint tid = gl_LocalInvocationIndex;
  const uint row = tid / THREADS_PER_ROW;   // query row inside the tile
  const uint lane = tid % THREADS_PER_ROW;
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  if (q_begin >= q_len) return;  // past this batch entry's queries
  const uint q_end = min(q_begin + BLOCK_Q, q_len);
  const uint q_row = q_begin + row;
  const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0), q_stride = tensor_row_stride(VKF_TENSOR_Q);
  const uint do_base = tensor_base(VKF_TENSOR_DO, batch, head, seq.q_row0), do_stride = tensor_row_stride(VKF_TENSOR_DO);
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);

  for (uint i = tid; i < BLOCK_Q * HEAD_VEC4; i += WORKGROUP_SIZE) {
    const uint r = i / HEAD_VEC4, d4 = i % HEAD_VEC4;
    const bool inside = q_begin + r < q_len;
    q_rows[i] = inside ? load_q4(q_base + (q_begin + r) * q_stride, d4) : vec4(0.0);
    do_rows[i] = inside ? load_do4(do_base + (q_begin + r) * do_stride, d4) : vec4(0.0);
  }
  const float lse = row_lse_log2(lse_index(batch, head, seq, q_row), q_row, q_len);
  const float delta = row_delta(lse_index(batch, head, seq, q_row), q_row, q_len);
  const ScoreHead modifiers = score_head(batch, head);
  const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes

  vec4 dq[VEC4_PER_THREAD];  // this lane's columns: vec4 d4 = lane + k * THREADS_PER_ROW
  for (uint k = 0; k < VEC4_PER_THREAD; ++k) dq[k] = vec4(0.0);
  const uint row_first_key = row_keys_begin(q_row, q_len, kv_len);  // the row sees keys [row_first_key, row_keys)
  const uint row_keys = row_keys_end(q_row, q_len, kv_len);
  const uint state_base = dq_sum_row(batch, head, q_row) * HEAD_DIM;  // of this row in dq_state
  if (CHUNKED && pc.chunk_begin > 0 && q_row < q_len) {  // the sum of the earlier chunks
    for (uint k = 0; k < VEC4_PER_THREAD; ++k) dq[k] = load_state4(state_base, lane + k * THREADS_PER_ROW);
  }

  // Tiles wholly outside the rows' band are never visited; a chunk visits its own keys only.
  const uint kv_first = first_visible_kv_tile(q_begin, BLOCK_KV, q_len, kv_len);
  const uint kv_end = CHUNKED ? min(visible_kv_end(q_begin, q_end, q_len, kv_len), pc.chunk_end)
                              : visible_kv_end(q_begin, q_end, q_len, kv_len);
  MaskWalk closed_keys = mask_walk();  // the tiles the mask closes, read as the loop goes
  for (uint kv_begin = CHUNKED ? max(pc.chunk_begin, kv_first) : kv_first; kv_begin < kv_end; kv_begin += BLOCK_KV) {
    if (mask_closes_keys(closed_keys, mask_summary, q_begin, q_end, kv_begin, min(kv_begin + BLOCK_KV, kv_len))) continue;
    barrier();  // the previous step's tiles are no longer read (first step: Q / dO rows visible)
    for (uint i = tid; i < BLOCK_KV * HEAD_VEC4; i += WORKGROUP_SIZE) {
      const uint r = i / HEAD_VEC4, d4 = i % HEAD_VEC4;
      const bool inside = kv_begin + r < kv_len;
      k_tile[r * KV_STRIDE + d4] = inside ? load_k4(k_base + (kv_begin + r) * k_stride, d4) : vec4(0.0);
      v_tile[r * KV_STRIDE + d4] = inside ? load_v4(v_base + (kv_begin + r) * v_stride, d4) : vec4(0.0);
    }
    barrier();

    // dS for this lane's keys c = lane, lane + THREADS_PER_ROW, ...
    const bool masked_tile = tile_needs_mask(q_begin, BLOCK_Q, kv_begin, BLOCK_KV, q_len, kv_len);
    for (uint c = lane; c < BLOCK_KV; c += THREADS_PER_ROW) {
      float s = 0.0, dp = 0.0;
      [[dont_unroll]] for (uint d4 = 0; d4 < HEAD_VEC4; ++d4) {
        s += dot(q_rows[row * HEAD_VEC4 + d4], k_tile[c * KV_STRIDE + d4]);
        dp += dot(do_rows[row * HEAD_VEC4 + d4], v_tile[c * KV_STRIDE + d4]);
      }
      // A masked pair's dS is 0 whatever dP is (an inf in V would make P (dP - delta) NaN).
      const bool visible = !masked_tile || key_visible(q_row, kv_begin + c, q_len, kv_len);
      const float t = s * pc.scale_log2;
      ds_tile[row * BLOCK_KV + c] =
          visible ? pair_p(t, lse, modifiers, q_row, kv_begin + c, q_len, kv_len) * (dp - delta) * score_mod_derivative(t)
                  : 0.0;
    }
    barrier();

    // dQ += dS K (scaled once at the end), over the keys the row sees only: 0 x inf is NaN.
    const uint c_begin = masked_tile ? min(BLOCK_KV, uint(max(int(row_first_key) - int(kv_begin), 0))) : 0;
    const uint c_end = masked_tile ? min(BLOCK_KV, uint(max(int(row_keys) - int(kv_begin), 0))) : BLOCK_KV;
    for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
      const uint d4 = lane + k * THREADS_PER_ROW;
      if (d4 < HEAD_VEC4) {
        [[dont_unroll]] for (uint c = c_begin; c < c_end; ++c) dq[k] += ds_tile[row * BLOCK_KV + c] * k_tile[c * KV_STRIDE + d4];
      }
    }
  }

  if (CHUNKED && pc.chunk_end < pc.kv_len) {  // more chunks follow (for the longest sequence): keep the sum
    if (q_row < q_len) {
      for (uint k = 0; k < VEC4_PER_THREAD; ++k) store_state4(state_base, lane + k * THREADS_PER_ROW, dq[k]);
    }
    return;
  }
  if (q_row < q_len) {
    const uint out_base = q_base + q_row * q_stride;  // dQ has Q's strides
    const float scale = pc.scale_log2 / LOG2E;
    for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
      const uint d4 = lane + k * THREADS_PER_ROW;
      if (d4 < HEAD_VEC4) store_dq4(out_base, d4, dq[k] * scale);
    }
  }
}
