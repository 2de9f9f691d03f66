// FlashAttention-2 backward, dK and dV, on tensor cores (float16 tensors, head dim a multiple of
// 16): one workgroup per (tile of BLOCK_KV keys, kv head, batch); subgroup g owns key rows
// [16 g, 16 g + 16) of the tile and keeps their dK and dV accumulators in registers. The owned V
// rows stay in shared memory and the owned K rows in registers (A operands, loaded once through
// the region that then holds each step's Q and dO: a fifth to a third less shared memory, which
// lets a tile fit 16 KB at head dim 128); Q and dO tiles of BLOCK_Q rows stream through, for every
// query head of the GQA group, those whose rows see some of the tile's keys (the band's):
//   S^T = K Q^T      P^T = exp2(scale S^T - LSE)   dV += P^T dO
//   dP^T = V dO^T    dS^T = P^T * (dP^T - delta)   dK += dS^T Q   (times scale at the end)
// P^T and dS^T become A operands in registers (NV; KHR where the layout probe allows an element
// copy) or through a per-subgroup scratch (KHR elsewhere).
// Deterministic: every key row is summed by one subgroup in a fixed order, no atomics.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "coopmat/coopmat_extensions.glsl"

#include "common/shader_interface.h"
#include "coopmat/coopmat_constants.glsl"

#define VKF_DEFAULT_HEAD_DIM 128
#define VKF_DEFAULT_BLOCK_Q 16   // query rows per streamed tile
#define VKF_DEFAULT_BLOCK_KV 64  // key rows owned: 16 per subgroup
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"

const uint SUBGROUPS = WORKGROUP_SIZE / VKF_CM_SUBGROUP_SIZE;  // == BLOCK_KV / 16 (engine checks)
const uint Q_BLOCKS = BLOCK_Q / 16;
const uint D_BLOCKS = HEAD_DIM / 16;
const uint ROW_U4 = VKF_ROW_U4(HEAD_DIM);
const uint TILE_STRIDE = VKF_TILE_STRIDE(ROW_U4);

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

layout(std430, set = 0, binding = VKF_BWD_BINDING_Q) readonly buffer q_block { uvec4 q_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_V) readonly buffer v_block { uvec4 v_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DO) readonly buffer do_block { uvec4 do_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DK) writeonly buffer dk_u4_block { uvec4 dk_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DV) writeonly buffer dv_u4_block { uvec4 dv_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };

#include "common/backward_rows.glsl"

// V rows [0, BLOCK_KV) of this tile; from STREAM_ROW0 first its K rows, then each step's Q rows and
// dO rows.
const uint STREAM_ROW0 = BLOCK_KV;
shared uvec4 tiles[VKF_SMEM_DKDV_TILES_U4(BLOCK_KV, VKF_SMEM_DKDV_STREAM_ROWS(BLOCK_Q, BLOCK_KV), TILE_STRIDE)];
const uint Q_ROW0 = STREAM_ROW0, DO_ROW0 = STREAM_ROW0 + BLOCK_Q;
shared float lse_tile[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];                   // base 2; +inf where P must be 0
shared float delta_tile[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];
shared uint nonfinite_do;  // 1 once a tile that the band's edge crosses had an inf or NaN in dO
// Step (from 1) at which the staging last zeroed an inf or NaN in this row of the query tile: in
// tiles that the band's edge crosses, Q is zeroed for dK += dS^T Q (common/nonfinite.glsl).
shared uint query_nonfinite_step[VKF_SMEM_NONFINITE_STEPS(BLOCK_Q)];

const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_vk, store_vk, tiles, v_u4, k_u4, BLOCK_KV, KV_WORDS)
VKF_DEFINE_STAGE_ROW_PAIR(stage_vk, load_vk, store_vk, KV_WORDS)
const uint Q_DO_WORDS = VKF_STAGE_WORDS(BLOCK_Q);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT_AT(load_q_do, store_q_do, tiles, Q_ROW0, q_u4, do_u4, BLOCK_Q, Q_DO_WORDS)

void main() {
  const uint kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_begin = gl_WorkGroupID.x * BLOCK_KV;
  const uint own_row = 16 * gl_SubgroupID;  // this subgroup's first row inside the tile
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  if (kv_begin >= seq.kv_rows) return;  // past the key rows of this batch entry
  // A tile of keys the sequence does not attend to gets zero dK and dV: no query tile is visited.
  // Rows from q_loop_end on see none of its keys (all lie left of their band).
  const uint q_loop_end = kv_begin < kv_len ? visible_q_end(kv_begin, BLOCK_KV, q_len, kv_len) : 0;
  // Element offsets of each tensor's row 0 of this head, and row strides (dK, dV have K's, V's).
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);
  const uint q_stride = tensor_row_stride(VKF_TENSOR_Q), do_stride = tensor_row_stride(VKF_TENSOR_DO);

  if (gl_LocalInvocationIndex == 0) nonfinite_do = 0;  // before load_coordinates' barrier
  for (uint i = gl_LocalInvocationIndex; i < BLOCK_Q; i += WORKGROUP_SIZE) query_nonfinite_step[i] = 0;
  const VKF_ACC coord = load_coordinates();
  const uint kv_valid = kv_begin < kv_len ? min(BLOCK_KV, kv_len - kv_begin) : 0;
  stage_vk((v_base + kv_begin * v_stride) / 8, v_stride / 8, (k_base + kv_begin * k_stride) / 8, k_stride / 8, kv_valid);
  barrier();
  VKF_MAT_A k_frag[D_BLOCKS];  // the first step's barrier orders these reads before its staging
  [[unroll]] for (uint kb = 0; kb < D_BLOCKS; ++kb) {
    cm_load_rows(k_frag[kb], tiles, (STREAM_ROW0 + own_row) * TILE_STRIDE + 2 * kb, TILE_STRIDE);
  }

  VKF_ACC dk_acc[D_BLOCKS], dv_acc[D_BLOCKS];
  [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db) dk_acc[db] = dv_acc[db] = VKF_ACC(0.0);

  // Rows before visible_q_begin see none of this tile's keys (all lie right of their band): the
  // loop starts at the tile of BLOCK_Q rows that holds it.
  const uint q_first = (visible_q_begin(kv_begin, q_len, kv_len) / BLOCK_Q) * BLOCK_Q;
  const uint group = pc.q_heads / pc.kv_heads;
  CrossedRuns crossed = no_crossed_tiles(q_first, q_len);  // the same query tiles in every head
  uint step = 0;
  for (uint head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0);
    const uint do_base = tensor_base(VKF_TENSOR_DO, batch, head, seq.q_row0);
    const ScoreHead modifiers = score_head(batch, head);
    const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes
    MaskWalk closed_rows = mask_walk();  // the tiles the mask closes, read as the loop goes
    for (uint q_begin = q_first; q_begin < q_loop_end; q_begin += BLOCK_Q) {
      if (mask_closes_rows(closed_rows, mask_summary, q_begin, min(q_begin + BLOCK_Q, q_len), kv_begin,
                           min(kv_begin + BLOCK_KV, kv_len))) {
        // Skipped, its place in the crossed runs kept: the fix-ups read the runs as without a mask.
        const uint q_valid = min(BLOCK_Q, q_len - q_begin);
        if (tile_crosses_band(q_begin, q_valid, kv_begin, BLOCK_KV, q_len, kv_len)) {
          note_crossed_tile(crossed, q_begin, q_begin + q_valid);
        }
        continue;
      }
      barrier();  // the previous step's tile (first step: the K rows) is no longer read
      ++step;
      const uint q_valid = min(BLOCK_Q, q_len - q_begin);
      // Stage Q and dO (their infinities and NaNs zeroed where the band's edge crosses the tile).
      // Both tests take the whole key tile: the staging serves every subgroup, and the
      // zeroed_query test below runs in masked tiles only.
      const bool masked_tile = tile_needs_mask(q_begin, q_valid, kv_begin, BLOCK_KV, q_len, kv_len);
      {
        uvec4 q_words[Q_DO_WORDS], do_words[Q_DO_WORDS];
        load_q_do(q_words, do_words, (q_base + q_begin * q_stride) / 8, q_stride / 8, (do_base + q_begin * do_stride) / 8,
                  do_stride / 8, q_valid);
        if (tile_crosses_band(q_begin, q_valid, kv_begin, BLOCK_KV, q_len, kv_len)) {
          note_crossed_tile(crossed, q_begin, q_begin + q_valid);
          VKF_ZERO_NONFINITE_ROWS(q_words, Q_DO_WORDS, query_nonfinite_step, step);
          bool found = false;
          VKF_ZERO_NONFINITE(do_words, Q_DO_WORDS, found);
          if (found) atomicOr(nonfinite_do, 1u);
        }
        store_q_do(q_words, do_words);
      }
      for (uint i = gl_LocalInvocationIndex; i < BLOCK_Q; i += WORKGROUP_SIZE) {
        const uint row_index = lse_index(batch, head, seq, q_begin + i);
        lse_tile[i] = row_lse_log2(row_index, q_begin + i, q_len);
        delta_tile[i] = row_delta(row_index, q_begin + i, q_len);
      }
      barrier();

      // S^T = K Q^T, dP^T = V dO^T
      VKF_ACC st[Q_BLOCKS], dpt[Q_BLOCKS];
      [[unroll]] for (uint nb = 0; nb < Q_BLOCKS; ++nb) st[nb] = dpt[nb] = VKF_ACC(0.0);
      [[unroll]] for (uint kb = 0; kb < D_BLOCKS; ++kb) {
        VKF_MAT_A v_frag;
        cm_load_rows(v_frag, tiles, own_row * TILE_STRIDE + 2 * kb, TILE_STRIDE);
        [[unroll]] for (uint nb = 0; nb < Q_BLOCKS; ++nb) {
          VKF_MAT_B qt_frag, dot_frag;
          cm_load_cols(qt_frag, tiles, (Q_ROW0 + 16 * nb) * TILE_STRIDE + 2 * kb, TILE_STRIDE);
          cm_load_cols(dot_frag, tiles, (DO_ROW0 + 16 * nb) * TILE_STRIDE + 2 * kb, TILE_STRIDE);
          st[nb] = cm_mul_add(k_frag[kb], qt_frag, st[nb]);
          dpt[nb] = cm_mul_add(v_frag, dot_frag, dpt[nb]);
        }
      }

      // P^T = exp2(S^T scale - LSE), dS^T = P^T (dP^T - delta), in place; both 0 where masked,
      // whatever dP^T holds there; dS^T NaN where a query whose Q the staging zeroed sees the key
      // (common/nonfinite.glsl).
      [[unroll]] for (uint nb = 0; nb < Q_BLOCKS; ++nb) {
        [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) {
          const uint c = 16 * nb + cm_col(coord, i);
          const uint key = kv_begin + own_row + cm_row(coord, i);
          const float x = st[nb][i] * pc.scale_log2;
          const float p = pair_p(x, lse_tile[c], modifiers, q_begin + c, key, q_len, kv_len);
          const float ds = p * (dpt[nb][i] - delta_tile[c]) * score_mod_derivative(x);
          // Selects, not a branch around the stores (see the dQ kernel).
          const bool visible = !masked_tile || key_visible(q_begin + c, key, q_len, kv_len);
          const bool zeroed_query = masked_tile && query_nonfinite_step[c] == step;
          st[nb][i] = visible ? p : 0.0;
          dpt[nb][i] = !visible ? 0.0 : zeroed_query ? VKF_NAN : ds;
        }
      }

      // dV += P^T dO, dK += dS^T Q
      [[unroll]] for (uint nb = 0; nb < Q_BLOCKS; ++nb) {
        const VKF_MAT_A pt_frag = acc_to_a(st[nb]);
        const VKF_MAT_A dst_frag = acc_to_a(dpt[nb]);
        [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db) {
          VKF_MAT_B do_frag, q_frag;
          cm_load_rows(do_frag, tiles, (DO_ROW0 + 16 * nb) * TILE_STRIDE + 2 * db, TILE_STRIDE);
          cm_load_rows(q_frag, tiles, (Q_ROW0 + 16 * nb) * TILE_STRIDE + 2 * db, TILE_STRIDE);
          dv_acc[db] = cm_mul_add(pt_frag, do_frag, dv_acc[db]);
          dk_acc[db] = cm_mul_add(dst_frag, q_frag, dk_acc[db]);
        }
      }
    }
  }

  // Infinities and NaNs of dO that the staging zeroed, where the keys see them, read again from
  // the buffer (rare; common/nonfinite.glsl): the key's visible rows in the crossed tiles, in every
  // head.
  if (nonfinite_do != 0) {
    [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db) {
      [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) {
        const uint key = kv_begin + own_row + cm_row(coord, i), column = 16 * db + cm_col(coord, i);
        const uvec4 rows = crossed_part(crossed, key_rows_begin(key, q_len, kv_len), key_rows_end(key, q_len, kv_len));
        for (uint h = 0; h < group; ++h) {
          const uint do_base = tensor_base(VKF_TENSOR_DO, batch, kv_head * group + h, seq.q_row0);
          [[unroll]] for (uint run = 0; run < 2; ++run) {
            for (uint q = rows[2 * run]; q < rows[2 * run + 1]; ++q) {
              const float x = VKF_BUFFER_HALF(do_u4, do_base + q * do_stride + column);
              if (isinf(x) || isnan(x)) dv_acc[db][i] += x;
            }
          }
        }
      }
    }
  }

  const float scale = pc.scale_log2 / LOG2E;
  [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db) dk_acc[db] = dk_acc[db] * scale;
  // Rows [kv_len, kv_rows): zeros.
  VKF_STORE_ROW_BLOCK(dk_acc, 0, dk_u4, k_base, k_stride, kv_begin + own_row, seq.kv_rows);
  VKF_STORE_ROW_BLOCK(dv_acc, 0, dv_u4, v_base, v_stride, kv_begin + own_row, seq.kv_rows);
}
