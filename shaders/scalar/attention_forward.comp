// FlashAttention-2 forward, scalar (no tensor cores): one workgroup per (Q tile, head, batch).
//
// The Q tile (BLOCK_Q rows) is loaded once; K and V tiles (BLOCK_KV rows) stream through one
// shared-memory buffer. THREADS_PER_ROW invocations share each query row: they split the keys of
// S and the head-dim columns of O. Softmax is online (Milakov & Gimelshein), in base 2.
//
// Variants by define: VKF_STORAGE_F16 (tensor element type), VKF_SUBGROUP_OPS (row reductions).
// Everything else is a specialization constant (see common/shader_interface.h).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#define VKF_DEFAULT_HEAD_DIM 64
#define VKF_DEFAULT_BLOCK_Q 8
#define VKF_DEFAULT_BLOCK_KV 16
#define VKF_DEFAULT_THREADS_PER_ROW 8
#include "common/attention_preamble.glsl"  // WORKGROUP_SIZE == BLOCK_Q * THREADS_PER_ROW (engine checks)
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_WRITE_LSE) const bool WRITE_LSE = true;
layout(constant_id = VKF_SPEC_INSTRUMENT) const bool INSTRUMENT = false;  // false: the code below folds away
layout(constant_id = VKF_SPEC_CHUNKED) const bool CHUNKED = false;        // false: one pass over all keys

// Shared tiles hold rows of vec4, the head dim padded with zeros (common/shared_memory_sizes.h).
const uint HEAD_VEC4 = VKF_HEAD_VEC4(HEAD_DIM);
const uint KV_STRIDE = VKF_ODD_STRIDE(HEAD_VEC4);  // lanes reading different keys hit different banks
const uint VEC4_PER_THREAD = (HEAD_VEC4 + THREADS_PER_ROW - 1) / THREADS_PER_ROW;

#include "scalar/tensor_io.glsl"
#include "scalar/row_reduce.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_FWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_FWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_FWD_BINDING_MASK_TILES
#define VKF_SCORE_MOD_BINDING_SINKS VKF_FWD_BINDING_SINKS
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_FWD_BINDING_SEQUENCES
#include "common/sequences.glsl"

VKF_TENSOR_IN(VKF_FWD_BINDING_Q, q_data);
VKF_TENSOR_IN(VKF_FWD_BINDING_K, k_data);
VKF_TENSOR_IN(VKF_FWD_BINDING_V, v_data);
VKF_TENSOR_OUT(VKF_FWD_BINDING_O, o_data);
layout(std430, set = 0, binding = VKF_FWD_BINDING_LSE) writeonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_STATS) writeonly buffer stats_block { float stats_data[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_O_STATE) buffer o_state_block { vec4 o_state[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_ROW_STATE) buffer row_state_block { float row_state[]; };

shared vec4 q_tile[VKF_SMEM_OWNED_VEC4S(BLOCK_Q, HEAD_VEC4)];
shared vec4 kv_tile[VKF_SMEM_STREAMED_VEC4S(BLOCK_KV, KV_STRIDE)];  // K, then V, of the current key block
shared float p_tile[VKF_SMEM_SCORE_FLOATS(BLOCK_Q, BLOCK_KV)];      // S, then P = exp2(S - m), of the current block

VKF_DEFINE_VEC4_LOADER(load_q4, q_data)
VKF_DEFINE_VEC4_LOADER(load_k4, k_data)
VKF_DEFINE_VEC4_LOADER(load_v4, v_data)
VKF_DEFINE_VEC4_STORER(store_o4, o_data)

// Copies rows [kv_begin, kv_begin + BLOCK_KV) of this head's K or V (key n at element
// base + n * stride) into kv_tile; rows past kv_len become zeros (they are masked out of S, and P
// is 0 there).
void load_kv_tile(bool load_v, uint base, uint stride, uint kv_begin, uint kv_len) {
  for (uint i = gl_LocalInvocationIndex; i < BLOCK_KV * HEAD_VEC4; i += WORKGROUP_SIZE) {
    const uint r = i / HEAD_VEC4, d4 = i % HEAD_VEC4;
    const uint key = kv_begin + r;
    const uint row_base = base + key * stride;
    kv_tile[r * KV_STRIDE + d4] = key >= kv_len ? vec4(0.0) : load_v ? load_v4(row_base, d4) : load_k4(row_base, d4);
  }
}

// Instrumented variant: the online softmax's state for this row after key tile kv_begin (see
// VKF_STATS_* in shader_interface.h). Uniform control flow: the reductions may hold barriers.
void record_tile_stats(uint batch, uint head, uint q_row, uint kv_begin, uint lane, float m_new, float alpha,
                       float row_tile_max, float tile_sum, float l_partial) {
  const float row_l = row_sum(l_partial);
  const float row_tile_sum = row_sum(tile_sum);
  if (lane == 0 && q_row < pc.q_len) {
    const uint tiles = (pc.kv_len + BLOCK_KV - 1) / BLOCK_KV;
    const uint base = (((batch * pc.q_heads + head) * pc.q_len + q_row) * tiles + kv_begin / BLOCK_KV) * VKF_STATS_FLOATS;
    stats_data[base + VKF_STATS_RUNNING_MAX] = m_new * LN2;
    stats_data[base + VKF_STATS_RUNNING_SUM] = row_l;
    stats_data[base + VKF_STATS_RESCALE] = alpha;
    stats_data[base + VKF_STATS_TILE_MAX] = row_tile_max * LN2;
    stats_data[base + VKF_STATS_TILE_SUM] = row_tile_sum;
  }
}

void main() {
  const uint tid = gl_LocalInvocationIndex;
  const uint row = tid / THREADS_PER_ROW;   // query row inside the tile
  const uint lane = tid % THREADS_PER_ROW;  // position among the row's invocations
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);  // GQA / MQA
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  if (q_begin >= q_len) return;  // past this batch entry's queries (a shorter sequence)
  const uint q_end = min(q_begin + BLOCK_Q, q_len);
  const uint q_row = q_begin + row;
  const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0), q_stride = tensor_row_stride(VKF_TENSOR_Q);
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);

  // Load the Q tile once; rows past q_len are zeros and are never stored.
  for (uint i = tid; i < BLOCK_Q * HEAD_VEC4; i += WORKGROUP_SIZE) {
    const uint r = i / HEAD_VEC4;
    q_tile[i] = q_begin + r < q_len ? load_q4(q_base + (q_begin + r) * q_stride, i % HEAD_VEC4) : vec4(0.0);
  }

  float m;          // running row max of S (base-2 units), the same in every lane of a row
  float l_partial;  // this lane's share of the running row sum of P
  softmax_start(head, m, l_partial);  // from the sink, if any: lane 0's share holds it
  if (lane != 0) l_partial = 0.0;
  const ScoreHead modifiers = score_head(batch, head);
  const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes
  vec4 acc[VEC4_PER_THREAD];  // this lane's columns of the unnormalized O row: vec4 d4 = lane + k * THREADS_PER_ROW
  for (uint k = 0; k < VEC4_PER_THREAD; ++k) acc[k] = vec4(0.0);
  const uint row_index = (batch * pc.q_heads + head) * pc.q_len + q_row;  // of the row state
  const uint row_first_key = row_keys_begin(q_row, q_len, kv_len);  // the row sees keys [row_first_key, row_keys)
  const uint row_keys = row_keys_end(q_row, q_len, kv_len);

  // A later chunk resumes the online softmax where the last one stopped: its running max, each
  // lane's share of the sum and of O, as they were (nothing rounded in between: the same results
  // as one pass over all keys, also where scores are large).
  const uint row_state_base = row_index * (THREADS_PER_ROW + 1);  // the max, then the lanes' sums
  if (CHUNKED && pc.chunk_begin > 0 && q_row < q_len) {
    m = row_state[row_state_base];
    l_partial = row_state[row_state_base + 1 + lane];
    for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
      const uint d4 = lane + k * THREADS_PER_ROW;
      if (d4 < HEAD_VEC4) acc[k] = o_state[row_index * HEAD_VEC4 + d4];
    }
  }

  // Tiles wholly outside the rows' band are never visited; a chunk visits its own keys only.
  const uint kv_first = first_visible_kv_tile(q_begin, BLOCK_KV, q_len, kv_len);
  const uint kv_end = CHUNKED ? min(visible_kv_end(q_begin, q_end, q_len, kv_len), pc.chunk_end)
                              : visible_kv_end(q_begin, q_end, q_len, kv_len);
  MaskWalk closed_keys = mask_walk();  // the tiles the mask closes, read as the loop goes
  for (uint kv_begin = CHUNKED ? max(pc.chunk_begin, kv_first) : kv_first; kv_begin < kv_end; kv_begin += BLOCK_KV) {
    if (mask_closes_keys(closed_keys, mask_summary, q_begin, q_end, kv_begin, min(kv_begin + BLOCK_KV, kv_len))) continue;
    load_kv_tile(false, k_base, k_stride, kv_begin, kv_len);
    barrier();  // K tile (and, on the first pass, the Q tile) visible

    // S = Q K^T * scale * log2(e); this lane takes keys c = lane, lane + THREADS_PER_ROW, ...
    const bool masked_tile = tile_needs_mask(q_begin, BLOCK_Q, kv_begin, BLOCK_KV, q_len, kv_len);
    float tile_max = NEG_INF;
    for (uint c = lane; c < BLOCK_KV; c += THREADS_PER_ROW) {
      float s = 0.0;
      [[dont_unroll]] for (uint d4 = 0; d4 < HEAD_VEC4; ++d4) s += dot(q_tile[row * HEAD_VEC4 + d4], kv_tile[c * KV_STRIDE + d4]);
      s *= pc.scale_log2;
      if (scores_modified()) s = score_mod(s, modifiers, q_row, kv_begin + c, q_len, kv_len);
      if (masked_tile && !key_visible(q_row, kv_begin + c, q_len, kv_len)) s = NEG_INF;
      p_tile[row * BLOCK_KV + c] = s;
      tile_max = max(tile_max, s);
    }
    tile_max = row_max(tile_max);

    // Online softmax: new running max, P = exp2(S - m_new), rescale what was accumulated.
    const float m_new = max(m, tile_max);
    const float m_ref = m_new == NEG_INF ? 0.0 : m_new;  // row saw no key yet: keeps exp2 off NaN
    const float alpha = exp2(m - m_ref);                  // exp(m_old - m_new); 0 when m_old = -inf
    float tile_sum = 0.0;
    for (uint c = lane; c < BLOCK_KV; c += THREADS_PER_ROW) {
      const float p = exp2(p_tile[row * BLOCK_KV + c] - m_ref);
      p_tile[row * BLOCK_KV + c] = p;
      tile_sum += p;
    }
    l_partial = l_partial * alpha + tile_sum;
    for (uint k = 0; k < VEC4_PER_THREAD; ++k) acc[k] *= alpha;
    m = m_new;
    if (INSTRUMENT) record_tile_stats(batch, head, q_row, kv_begin, lane, m_new, alpha, tile_max, tile_sum, l_partial);
    barrier();  // everyone is done with K

    load_kv_tile(true, v_base, v_stride, kv_begin, kv_len);
    barrier();  // V tile and the whole P tile visible

    // O += P V, for this lane's columns. Keys the row cannot see are left out, not multiplied by
    // P = 0: 0 x inf would be NaN (common/nonfinite.glsl).
    const uint c_begin = masked_tile ? min(BLOCK_KV, uint(max(int(row_first_key) - int(kv_begin), 0))) : 0;
    const uint c_end = masked_tile ? min(BLOCK_KV, uint(max(int(row_keys) - int(kv_begin), 0))) : BLOCK_KV;
    for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
      const uint d4 = lane + k * THREADS_PER_ROW;
      if (d4 < HEAD_VEC4) {
        vec4 sum = vec4(0.0);
        [[dont_unroll]] for (uint c = c_begin; c < c_end; ++c) sum += p_tile[row * BLOCK_KV + c] * kv_tile[c * KV_STRIDE + d4];
        acc[k] += sum;
      }
    }
    barrier();  // everyone is done with V and P before the next tile overwrites them
  }

  if (CHUNKED && pc.chunk_end < pc.kv_len) {  // more chunks follow (for the longest sequence): keep the state
    if (q_row < q_len) {
      for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
        const uint d4 = lane + k * THREADS_PER_ROW;
        if (d4 < HEAD_VEC4) o_state[row_index * HEAD_VEC4 + d4] = acc[k];
      }
      if (lane == 0) row_state[row_state_base] = m;
      row_state[row_state_base + 1 + lane] = l_partial;
    }
    return;
  }

  // Epilogue: O = acc / l, LSE = ln(l) + m (natural log). A row that saw no key: O = 0, LSE = -inf.
  // A NaN score made l NaN: then O and LSE are NaN, never the "no key" values.
  const float l = row_sum(l_partial);
  if (q_row < q_len) {
    const float inv_l = l == 0.0 ? 0.0 : 1.0 / l;
    const float lse_log2 = l == 0.0 ? NEG_INF : m + log2(l);
    const uint out_base = tensor_base(VKF_TENSOR_O, batch, head, seq.q_row0) + q_row * tensor_row_stride(VKF_TENSOR_O);
    for (uint k = 0; k < VEC4_PER_THREAD; ++k) {
      const uint d4 = lane + k * THREADS_PER_ROW;
      if (d4 < HEAD_VEC4) store_o4(out_base, d4, acc[k] * inv_l);
    }
    if (WRITE_LSE && lane == 0) lse_data[lse_index(batch, head, seq, q_row)] = lse_log2 * LN2;
  }
}
