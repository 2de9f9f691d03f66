// FlashAttention-2 backward, dQ, on tensor cores (float16 tensors, head dim a multiple of 16):
// one workgroup per (tile of BLOCK_Q queries, query head, batch); subgroup g owns query rows
// [16 g, 16 g + 16) and keeps their Q and dO fragments and dQ accumulators in registers, while
// K and V tiles of BLOCK_KV rows stream through shared memory, those that the rows' band reaches:
//   S = Q K^T   P = exp2(scale S - LSE)   dP = dO V^T   dS = P * (dP - delta)   dQ += dS K
// (times scale at the end). Deterministic: each row is summed by one subgroup, no atomics.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "coopmat/coopmat_extensions.glsl"

#include "common/shader_interface.h"
#include "coopmat/coopmat_constants.glsl"

#define VKF_DEFAULT_HEAD_DIM 128
#define VKF_DEFAULT_BLOCK_Q 64   // query rows owned: 16 per subgroup
#define VKF_DEFAULT_BLOCK_KV 32  // key rows per streamed tile
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"

const uint SUBGROUPS = WORKGROUP_SIZE / VKF_CM_SUBGROUP_SIZE;  // == BLOCK_Q / 16 (engine checks)
const uint N_BLOCKS = BLOCK_KV / 16;
const uint D_BLOCKS = HEAD_DIM / 16;
const uint ROW_U4 = VKF_ROW_U4(HEAD_DIM);
const uint TILE_STRIDE = VKF_TILE_STRIDE(ROW_U4);
const uint ROWS_PER_LANE = VKF_CM_ROWS_PER_LANE;

#include "common/constants.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_BWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_BWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_BWD_BINDING_MASK_TILES
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"  // strides are multiples of 8 elements here (the engine checks)
#include "coopmat/coopmat.glsl"
#include "coopmat/coopmat_tiles.glsl"
#include "common/nonfinite.glsl"

layout(std430, set = 0, binding = VKF_BWD_BINDING_Q) readonly buffer q_u4_block { uvec4 q_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_V) readonly buffer v_block { uvec4 v_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DO) readonly buffer do_u4_block { uvec4 do_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ) writeonly buffer dq_u4_block { uvec4 dq_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };

#include "common/backward_rows.glsl"

shared uvec4 kv_tiles[VKF_SMEM_ROW_PAIR_U4(BLOCK_KV, TILE_STRIDE)];  // K rows, then V rows, of the streamed tile
// Step (from 1) at which the staging last zeroed an inf or NaN in this row of the key tile: in
// tiles that the band's edge crosses, K is zeroed for dQ += dS K (common/nonfinite.glsl).
shared uint key_nonfinite_step[VKF_SMEM_NONFINITE_STEPS(BLOCK_KV)];

const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_kv, store_kv, kv_tiles, k_u4, v_u4, BLOCK_KV, KV_WORDS)

void main() {
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  if (q_begin >= q_len) return;  // past this batch entry's queries
  const uint q_end = min(q_begin + BLOCK_Q, q_len);
  const uint row0 = q_begin + 16 * gl_SubgroupID;  // this subgroup's first query row
  // Element offsets of each tensor's row 0 of this head, and row strides (dQ has Q's).
  const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0), q_stride = tensor_row_stride(VKF_TENSOR_Q);
  const uint do_base = tensor_base(VKF_TENSOR_DO, batch, head, seq.q_row0), do_stride = tensor_row_stride(VKF_TENSOR_DO);
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);

  for (uint i = gl_LocalInvocationIndex; i < BLOCK_KV; i += WORKGROUP_SIZE) key_nonfinite_step[i] = 0;
  const VKF_ACC coord = load_coordinates();  // (its barrier also publishes the zeros above)
  VKF_MAT_A q_frag[D_BLOCKS], do_frag[D_BLOCKS];
  VKF_LOAD_ROW_BLOCK(q_frag, 0, q_u4, q_base, q_stride, row0, q_len);
  VKF_LOAD_ROW_BLOCK(do_frag, 0, do_u4, do_base, do_stride, row0, q_len);

  // LSE (base 2, +inf where P must be 0) and delta of the lane's rows, per slot.
  const ScoreHead modifiers = score_head(batch, head);
  const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes
  float lse_row[ROWS_PER_LANE], delta_row[ROWS_PER_LANE];
  [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) {
    const uint r = row0 + cm_row(coord, i);
    lse_row[cm_slot(i)] = row_lse_log2(lse_index(batch, head, seq, r), r, q_len);
    delta_row[cm_slot(i)] = row_delta(lse_index(batch, head, seq, r), r, q_len);
  }

  VKF_ACC dq_acc[D_BLOCKS];
  [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db) dq_acc[db] = VKF_ACC(0.0);

  // Key tiles outside [kv_first, kv_end) are wholly masked for the workgroup's rows: never visited.
  const uint kv_first = first_visible_kv_tile(q_begin, BLOCK_KV, q_len, kv_len);
  const uint kv_end = visible_kv_end(q_begin, q_end, q_len, kv_len);
  MaskWalk closed_keys = mask_walk();  // the tiles the mask closes, read as the loop goes
  for (uint kv_begin = kv_first, step = 1; kv_begin < kv_end; kv_begin += BLOCK_KV, ++step) {
    if (mask_closes_keys(closed_keys, mask_summary, q_begin, q_end, kv_begin, min(kv_begin + BLOCK_KV, kv_len))) continue;
    const uint kv_valid = min(BLOCK_KV, kv_len - kv_begin);
    // Stage K and V (K's infinities and NaNs zeroed where the band's edge crosses the tile). Both
    // tests take the workgroup's rows: the staging serves every subgroup, and the zeroed_key test
    // below runs in masked tiles only.
    const bool masked_tile = tile_needs_mask(q_begin, q_end - q_begin, kv_begin, BLOCK_KV, q_len, kv_len);
    {
      uvec4 k_words[KV_WORDS], v_words[KV_WORDS];
      load_kv(k_words, v_words, (k_base + kv_begin * k_stride) / 8, k_stride / 8, (v_base + kv_begin * v_stride) / 8,
              v_stride / 8, kv_valid);
      if (tile_crosses_band(q_begin, q_end - q_begin, kv_begin, BLOCK_KV, q_len, kv_len)) {
        VKF_ZERO_NONFINITE_ROWS(k_words, KV_WORDS, key_nonfinite_step, step);
      }
      store_kv(k_words, v_words);
    }
    barrier();  // K and V tiles visible

    // S = Q K^T, dP = dO V^T
    VKF_ACC s[N_BLOCKS], dp[N_BLOCKS];
    [[unroll]] for (uint nb = 0; nb < N_BLOCKS; ++nb) s[nb] = dp[nb] = VKF_ACC(0.0);
    [[unroll]] for (uint nb = 0; nb < N_BLOCKS; ++nb) {
      [[unroll]] for (uint kb = 0; kb < D_BLOCKS; ++kb) {
        VKF_MAT_B kt_frag, vt_frag;
        cm_load_cols(kt_frag, kv_tiles, 16 * nb * TILE_STRIDE + 2 * kb, TILE_STRIDE);
        cm_load_cols(vt_frag, kv_tiles, (BLOCK_KV + 16 * nb) * TILE_STRIDE + 2 * kb, TILE_STRIDE);
        s[nb] = cm_mul_add(q_frag[kb], kt_frag, s[nb]);
        dp[nb] = cm_mul_add(do_frag[kb], vt_frag, dp[nb]);
      }
    }

    // dS = P (dP - delta), P = exp2(S scale - LSE); 0 where masked, whatever dP holds there; NaN
    // where the row sees a key whose K the staging zeroed (common/nonfinite.glsl).
    [[unroll]] for (uint nb = 0; nb < N_BLOCKS; ++nb) {
      [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) {
        const uint t = cm_slot(i), c = 16 * nb + cm_col(coord, i);
        const uint q_row = row0 + cm_row(coord, i);
        const float x = s[nb][i] * pc.scale_log2;
        const float ds = pair_p(x, lse_row[t], modifiers, q_row, kv_begin + c, q_len, kv_len) * (dp[nb][i] - delta_row[t]) *
                         score_mod_derivative(x);
        // Selects, not a branch around the store: a matrix element written in one branch only made
        // the NV and KHR backward less than half as fast on the H100 (docs/tuning-log.md).
        const bool visible = !masked_tile || key_visible(q_row, kv_begin + c, q_len, kv_len);
        const bool zeroed_key = masked_tile && key_nonfinite_step[c] == step;
        s[nb][i] = !visible ? 0.0 : zeroed_key ? VKF_NAN : ds;
      }
    }

    // dQ += dS K
    [[unroll]] for (uint nb = 0; nb < N_BLOCKS; ++nb) {
      const VKF_MAT_A ds_frag = acc_to_a(s[nb]);
      [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db) {
        VKF_MAT_B k_frag;
        cm_load_rows(k_frag, kv_tiles, 16 * nb * TILE_STRIDE + 2 * db, TILE_STRIDE);
        dq_acc[db] = cm_mul_add(ds_frag, k_frag, dq_acc[db]);
      }
    }
    barrier();  // every subgroup is done with K and V before the next tile overwrites them
  }

  const float scale = pc.scale_log2 / LOG2E;
  [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db) dq_acc[db] = dq_acc[db] * scale;
  VKF_STORE_ROW_BLOCK(dq_acc, 0, dq_u4, q_base, q_stride, row0, q_len);
}
