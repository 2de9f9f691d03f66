// The bias's gradient (docs/design.md): dBias = dS = P * (dP - delta) of every pair (the bias adds
// to the final score, so no softcap derivative), summed over the dimensions of [B, Hq, Nq, Nk] the
// mask broadcasts. Every family's: it recomputes S = Q K^T and dP = dO V^T of the pairs instead of
// keeping dS from the gradient kernels, so memory stays the mask's size.
// Each workgroup owns a tile of BLOCK_Q x BLOCK_KV elements of dBias (one invocation each) and walks
// the pairs that map to them (every batch entry, head, row or key the mask broadcasts over) in a
// fixed order; where several of its invocations map to one element, one of them adds their sums in
// a fixed order too. So the bits never vary. On a driver with a loop budget (CHUNKED) each dispatch
// walks a stretch of that order and leaves each invocation's sum to the next in dbias_state:
// the same bits as one pass.
// Dispatch: (key tiles of the mask, its row tiles, its batch entries x heads), after the preprocess.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#define VKF_DEFAULT_HEAD_DIM 64
#define VKF_DEFAULT_BLOCK_Q 8
#define VKF_DEFAULT_BLOCK_KV 16
#include "common/attention_preamble.glsl"  // WORKGROUP_SIZE = BLOCK_Q * BLOCK_KV

#include "scalar/tensor_io.glsl"
#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_BWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_BWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_BWD_BINDING_MASK_TILES
#include "common/score_mod.glsl"

VKF_TENSOR_IN(VKF_BWD_BINDING_Q, q_data);
VKF_TENSOR_IN(VKF_BWD_BINDING_K, k_data);
VKF_TENSOR_IN(VKF_BWD_BINDING_V, v_data);
VKF_TENSOR_IN(VKF_BWD_BINDING_DO, do_data);
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DBIAS) writeonly buffer dbias_block { float dbias[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DBIAS_STATE) buffer dbias_state_block { float dbias_state[]; };
layout(constant_id = VKF_SPEC_CHUNKED) const bool CHUNKED = false;  // false: one pass over every step
#include "common/backward_rows.glsl"

// Head-dim columns staged at a time: a few KB of shared memory whatever the head dim.
const uint CHUNK = 32;
shared float q_chunk[BLOCK_Q * CHUNK], do_chunk[BLOCK_Q * CHUNK];
shared float k_chunk[BLOCK_KV * CHUNK], v_chunk[BLOCK_KV * CHUNK];
shared float sums[BLOCK_Q * BLOCK_KV];

void main() {
  const uint lane = gl_LocalInvocationIndex, r = lane / BLOCK_KV, c = lane % BLOCK_KV;
  const bool has_batch = (MASK_DIMS & VKF_MASK_HAS_BATCH) != 0, has_heads = (MASK_DIMS & VKF_MASK_HAS_HEADS) != 0;
  const bool has_rows = (MASK_DIMS & VKF_MASK_HAS_ROWS) != 0, has_keys = (MASK_DIMS & VKF_MASK_HAS_KEYS) != 0;
  const uint mask_heads = has_heads ? pc.q_heads : 1u;
  const uint mask_batch = gl_WorkGroupID.z / mask_heads, mask_head = gl_WorkGroupID.z % mask_heads;
  const uint row_tile = gl_WorkGroupID.y * BLOCK_Q, key_tile = gl_WorkGroupID.x * BLOCK_KV;

  // The walk: one loop over tile steps (batch entry, head, row tile, key tile, the last fastest),
  // each dimension the mask has taking one step, the others their whole extent for the longest
  // sequence (a shorter one's steps past its end do nothing). The host keeps the count below 2^32.
  const uint batch_steps = has_batch ? 1u : pc.batch, head_steps = has_heads ? 1u : pc.q_heads;
  const uint row_steps = has_rows ? 1u : (pc.q_len + BLOCK_Q - 1) / BLOCK_Q;
  const uint key_steps = has_keys ? 1u : (pc.kv_len + BLOCK_KV - 1) / BLOCK_KV;
  const uint walk_steps = batch_steps * head_steps * row_steps * key_steps;
  const uint state_at =
      ((gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WORKGROUP_SIZE + lane;

  float sum = CHUNKED && pc.chunk_begin > 0 ? dbias_state[state_at] : 0.0;  // this invocation's pairs, in walk order
  for (uint step = CHUNKED ? pc.chunk_begin : 0u; step < (CHUNKED ? pc.chunk_end : walk_steps); ++step) {
    const uint key_step = step % key_steps, row_step = (step / key_steps) % row_steps;
    const uint head_step = (step / (key_steps * row_steps)) % head_steps, batch_step = step / (key_steps * row_steps * head_steps);
    const uint batch = has_batch ? mask_batch : batch_step, head = has_heads ? mask_head : head_step;
    const Sequence seq = sequence_of(batch);
    const uint q_len = seq.q_len, kv_len = seq.kv_len;
    // the rows and keys of this sequence that map to the tile's elements
    const uint rows_begin = has_rows ? row_tile : 0, rows_end = has_rows ? min(row_tile + BLOCK_Q, q_len) : q_len;
    const uint keys_begin = has_keys ? key_tile : 0, keys_end = has_keys ? min(key_tile + BLOCK_KV, kv_len) : kv_len;
    const uint q0 = rows_begin + row_step * BLOCK_Q, k0 = keys_begin + key_step * BLOCK_KV;
    if (q0 >= rows_end || k0 >= keys_end) continue;  // past this sequence's rows or keys
    // pairs the mask blocks add dS = 0: a tile it closes is skipped
    if (mask_closes_tile(mask_summary_base(batch, head), q0, min(q0 + BLOCK_Q, rows_end), k0, min(k0 + BLOCK_KV, keys_end))) continue;
    const uint kv_head = head / (pc.q_heads / pc.kv_heads);
    const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0), q_stride = tensor_row_stride(VKF_TENSOR_Q);
    const uint do_base = tensor_base(VKF_TENSOR_DO, batch, head, seq.q_row0), do_stride = tensor_row_stride(VKF_TENSOR_DO);
    const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
    const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);
    float s = 0.0, dp = 0.0;
    for (uint d0 = 0; d0 < HEAD_DIM; d0 += CHUNK) {
      barrier();  // everyone is done with the last chunk
      for (uint e = lane; e < BLOCK_Q * CHUNK; e += WORKGROUP_SIZE) {
        const uint row = q0 + e / CHUNK, d = d0 + e % CHUNK;
        const bool inside = row < rows_end && d < HEAD_DIM;
        q_chunk[e] = inside ? float(q_data[q_base + row * q_stride + d]) : 0.0;
        do_chunk[e] = inside ? float(do_data[do_base + row * do_stride + d]) : 0.0;
      }
      for (uint e = lane; e < BLOCK_KV * CHUNK; e += WORKGROUP_SIZE) {
        const uint key = k0 + e / CHUNK, d = d0 + e % CHUNK;
        const bool inside = key < keys_end && d < HEAD_DIM;
        k_chunk[e] = inside ? float(k_data[k_base + key * k_stride + d]) : 0.0;
        v_chunk[e] = inside ? float(v_data[v_base + key * v_stride + d]) : 0.0;
      }
      barrier();
      for (uint d = 0; d < CHUNK; ++d) {
        s += q_chunk[r * CHUNK + d] * k_chunk[c * CHUNK + d];
        dp += do_chunk[r * CHUNK + d] * v_chunk[c * CHUNK + d];
      }
    }
    const uint q_row = q0 + r, key = k0 + c;
    if (q_row < rows_end && key < keys_end && key_visible(q_row, key, q_len, kv_len)) {
      const uint row_index = lse_index(batch, head, seq, q_row);
      const float p = pair_p(s * pc.scale_log2, row_lse_log2(row_index, q_row, q_len), score_head(batch, head), q_row,
                             key, q_len, kv_len);
      sum += p * (dp - row_delta(row_index, q_row, q_len));
    }
  }
  if (CHUNKED && pc.chunk_end < walk_steps) {  // more chunks follow: keep the sum
    dbias_state[state_at] = sum;
    return;
  }

  // Invocations that map to one element (along a broadcast rows or keys dimension): the first of
  // them adds the others' sums, in order.
  sums[lane] = sum;
  barrier();
  if ((!has_keys && c != 0) || (!has_rows && r != 0)) return;
  float total = 0.0;
  for (uint rr = has_rows ? r : 0; rr < (has_rows ? r + 1 : BLOCK_Q); ++rr) {
    for (uint cc = has_keys ? c : 0; cc < (has_keys ? c + 1 : BLOCK_KV); ++cc) total += sums[rr * BLOCK_KV + cc];
  }
  const uint row = has_rows ? row_tile + r : 0, key = has_keys ? key_tile + c : 0;
  if ((has_rows && row >= pc.mask_q_len) || (has_keys && key >= pc.mask_kv_len)) return;
  dbias[gl_WorkGroupID.z * mask_head_elements() + row * mask_row_stride() + key] = total;
}
