// FlashAttention-2 forward on tensor cores (cooperative matrices), float16 tensors, head dim a
// multiple of 16. One workgroup per (Q tile, head, batch); each subgroup owns M_BLOCKS blocks of
// 16 query rows and keeps their Q fragments and O accumulators in registers for the whole pass.
// K and V tiles (BLOCK_KV rows) are staged together in shared memory once per step.
//
// S = Q K^T and O += P V are 16x16x16 matrix multiply-adds. The online softmax runs on the S
// accumulators in registers: the engine's layout probe tells which elements of a lane share a
// row (slots) and which lanes share a row (a shuffle mask), so row max and row sum are a few
// shuffles, and P goes from the float32 S accumulator to the float16 A operand of P V without
// leaving registers (NV; KHR where the probe finds A laid out like the accumulator) or through a
// 16x16 per-subgroup scratch (KHR elsewhere: its types carry a use).
//
// Variants by define: VKF_COOPMAT_KHR (0: GL_NV_cooperative_matrix, 1: GL_KHR_cooperative_matrix).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "coopmat/coopmat_extensions.glsl"

#include "common/shader_interface.h"
#include "coopmat/coopmat_constants.glsl"

#define VKF_DEFAULT_HEAD_DIM 128
#define VKF_DEFAULT_BLOCK_Q 64
#define VKF_DEFAULT_BLOCK_KV 64
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_WRITE_LSE) const bool WRITE_LSE = true;

const uint SUBGROUPS = WORKGROUP_SIZE / VKF_CM_SUBGROUP_SIZE;
const uint M_BLOCKS = BLOCK_Q / (16 * SUBGROUPS);  // 16-row blocks per subgroup (engine checks)
const uint N_BLOCKS = BLOCK_KV / 16;                // 16-key blocks per tile
const uint D_BLOCKS = HEAD_DIM / 16;
const uint ROW_U4 = VKF_ROW_U4(HEAD_DIM);           // a row of float16 as uvec4 (8 halves)
const uint TILE_STRIDE = VKF_TILE_STRIDE(ROW_U4);   // odd: 8 rows of one load hit 8 different banks
const uint ROWS_PER_LANE = VKF_CM_ROWS_PER_LANE;

#include "common/constants.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_FWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_FWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_FWD_BINDING_MASK_TILES
#define VKF_SCORE_MOD_BINDING_SINKS VKF_FWD_BINDING_SINKS
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_FWD_BINDING_SEQUENCES
#include "common/sequences.glsl"  // strides are multiples of 8 elements here (the engine checks)
#include "coopmat/coopmat.glsl"
#include "coopmat/coopmat_tiles.glsl"
#include "common/nonfinite.glsl"

layout(std430, set = 0, binding = VKF_FWD_BINDING_Q) readonly buffer q_u4_block { uvec4 q_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_Q) readonly buffer q_h_block { float16_t q_h[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_K) readonly buffer k_u4_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_V) readonly buffer v_u4_block { uvec4 v_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_O) writeonly buffer o_u4_block { uvec4 o_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_O) writeonly buffer o_h_block { float16_t o_h[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_LSE) writeonly buffer lse_block { float lse_data[]; };

shared uvec4 kv_tiles[VKF_SMEM_ROW_PAIR_U4(BLOCK_KV, TILE_STRIDE)];  // K rows [0, BLOCK_KV), then V rows
shared uint nonfinite_v;  // 1 once a tile that the band's edge crosses had an inf or NaN in V

const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_kv, store_kv, kv_tiles, k_u4, v_u4, BLOCK_KV, KV_WORDS)

// Q's and O's row blocks: through the subgroup's scratch (coopmat/coopmat_tiles.glsl) from head dim
// 80, straight from and to memory up to 64. Measured on an H200 (docs/tuning-log.md, "row blocks
// through a scratch"): the scratch ran D = 128 3.5% (KHR) and 5.7% (NV) faster, D = 64 9% and 8%
// slower; the rest of the loop's register allocation moves with it. Other head dims are untimed.
const bool ROW_BLOCKS_DIRECT = HEAD_DIM <= 64;

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);  // GQA / MQA
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  if (q_begin >= q_len) return;  // past this batch entry's queries
  const uint q_end = min(q_begin + BLOCK_Q, q_len);
  const uint rows_begin = q_begin + gl_SubgroupID * 16 * M_BLOCKS;  // this subgroup's first row
  // Element offsets of each tensor's row 0 of this head, and row strides (in halves).
  const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0), q_stride = tensor_row_stride(VKF_TENSOR_Q);
  const uint o_base = tensor_base(VKF_TENSOR_O, batch, head, seq.q_row0), o_stride = tensor_row_stride(VKF_TENSOR_O);
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);

  if (gl_LocalInvocationIndex == 0) nonfinite_v = 0;  // before load_coordinates' barrier
  const VKF_ACC coord = load_coordinates();  // coordinates of every accumulator element

  // Q fragments (the scale is applied to S, so Q stays exactly as stored)
  VKF_MAT_A q_frag[M_BLOCKS * D_BLOCKS];
  [[unroll]] for (uint mb = 0; mb < M_BLOCKS; ++mb) {
    if (ROW_BLOCKS_DIRECT) {
      VKF_LOAD_ROW_BLOCK_DIRECT(q_frag, mb * D_BLOCKS, q_u4, q_h, coord, q_base, q_stride, rows_begin + 16 * mb, q_len);
    } else {
      VKF_LOAD_ROW_BLOCK(q_frag, mb * D_BLOCKS, q_u4, q_base, q_stride, rows_begin + 16 * mb, q_len);
    }
  }

  float m_run[M_BLOCKS * ROWS_PER_LANE];  // running row max of S (base 2), per (block, slot)
  // P, l and O are measured from m_run - depth_run (common/score_mod.glsl's reference_depth). The
  // sink joins at the end.
  float depth_run[M_BLOCKS * ROWS_PER_LANE];
  float l_part[M_BLOCKS * ROWS_PER_LANE]; // this lane's share of the running row sum of P
  VKF_ACC o_acc[M_BLOCKS * D_BLOCKS];
  [[unroll]] for (uint j = 0; j < M_BLOCKS * ROWS_PER_LANE; ++j) { m_run[j] = NEG_INF; depth_run[j] = 0.0; l_part[j] = 0.0; }
  const ScoreHead modifiers = score_head(batch, head);
  const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes
  [[unroll]] for (uint j = 0; j < M_BLOCKS * D_BLOCKS; ++j) o_acc[j] = VKF_ACC(0.0);

  // Key tiles outside [kv_first, kv_end) are wholly masked for the workgroup's rows: never visited.
  const uint kv_first = first_visible_kv_tile(q_begin, BLOCK_KV, q_len, kv_len);
  const uint kv_end = visible_kv_end(q_begin, q_end, q_len, kv_len);
  CrossedRuns crossed = no_crossed_tiles(kv_first, kv_len);
  MaskWalk closed_keys = mask_walk();  // the tiles the mask closes, read as the loop goes
  for (uint kv_begin = kv_first; kv_begin < kv_end; kv_begin += BLOCK_KV) {
    if (mask_closes_keys(closed_keys, mask_summary, q_begin, q_end, kv_begin, min(kv_begin + BLOCK_KV, kv_len))) {
      // Skipped, its place in the crossed runs kept: the fix-ups read the runs as without a mask.
      if (tile_crosses_band(q_begin, q_end - q_begin, kv_begin, BLOCK_KV, q_len, kv_len)) {
        note_crossed_tile(crossed, kv_begin, kv_begin + BLOCK_KV);
      }
      continue;
    }
    const uint kv_valid = min(BLOCK_KV, kv_len - kv_begin);  // rows past kv_len: zeros
    // Stage K and V (V's infinities and NaNs zeroed where the band's edge crosses the tile).
    const bool masked_tile = tile_needs_mask(q_begin, q_end - q_begin, kv_begin, BLOCK_KV, q_len, kv_len);
    {
      uvec4 k_words[KV_WORDS], v_words[KV_WORDS];
      load_kv(k_words, v_words, (k_base + kv_begin * k_stride) / 8, k_stride / 8, (v_base + kv_begin * v_stride) / 8,
              v_stride / 8, kv_valid);
      if (tile_crosses_band(q_begin, q_end - q_begin, kv_begin, BLOCK_KV, q_len, kv_len)) {
        note_crossed_tile(crossed, kv_begin, kv_begin + BLOCK_KV);
        bool found = false;
        VKF_ZERO_NONFINITE(v_words, KV_WORDS, found);
        if (found) atomicOr(nonfinite_v, 1u);
      }
      store_kv(k_words, v_words);
    }
    barrier();  // K and V tiles visible

    // S = Q K^T (each K fragment, loaded once, serves every row block of the subgroup)
    VKF_ACC s[M_BLOCKS * N_BLOCKS];
    [[unroll]] for (uint j = 0; j < M_BLOCKS * N_BLOCKS; ++j) s[j] = VKF_ACC(0.0);
    [[unroll]] for (uint nb = 0; nb < N_BLOCKS; ++nb) {
      [[unroll]] for (uint kb = 0; kb < D_BLOCKS; ++kb) {
        VKF_MAT_B k_frag;  // K^T block: column-major view of the K rows
        cm_load_cols(k_frag, kv_tiles, 16 * nb * TILE_STRIDE + 2 * kb, TILE_STRIDE);
        [[unroll]] for (uint mb = 0; mb < M_BLOCKS; ++mb)
          s[mb * N_BLOCKS + nb] = cm_mul_add(q_frag[mb * D_BLOCKS + kb], k_frag, s[mb * N_BLOCKS + nb]);
      }
    }

    // Online softmax on the accumulators: mask, row max, P = exp2(S - reference), rescale O and l.
    [[unroll]] for (uint mb = 0; mb < M_BLOCKS; ++mb) {
      float tile_max[ROWS_PER_LANE];
      [[unroll]] for (uint t = 0; t < ROWS_PER_LANE; ++t) tile_max[t] = NEG_INF;
      [[unroll]] for (uint nb = 0; nb < N_BLOCKS; ++nb) {
        [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) {
          float x = s[mb * N_BLOCKS + nb][i] * pc.scale_log2;
          const uint q_row = rows_begin + 16 * mb + cm_row(coord, i), key = kv_begin + 16 * nb + cm_col(coord, i);
          if (scores_modified()) x = score_mod(x, modifiers, q_row, key, q_len, kv_len);
          if (masked_tile && !key_visible(q_row, key, q_len, kv_len)) x = NEG_INF;
          s[mb * N_BLOCKS + nb][i] = x;
          tile_max[cm_slot(i)] = max(tile_max[cm_slot(i)], x);
        }
      }
      float exp2_ref[ROWS_PER_LANE], alpha[ROWS_PER_LANE], tile_sum[ROWS_PER_LANE];
      [[unroll]] for (uint t = 0; t < ROWS_PER_LANE; ++t) {
        const uint j = mb * ROWS_PER_LANE + t;
        const float row_tile_max = cm_row_max(tile_max[t]);
        const float m_new = max(m_run[j], row_tile_max), depth_new = reference_depth(m_new, row_tile_max);
        alpha[t] = exp2(reference_rescale_log2(m_run[j], depth_run[j], m_new, depth_new));
        const float ref_new = m_new - depth_new;
        exp2_ref[t] = ref_new == NEG_INF ? 0.0 : ref_new;  // row saw no key yet: keeps exp2 off NaN
        m_run[j] = m_new;
        depth_run[j] = depth_new;
        tile_sum[t] = 0.0;
      }
      [[unroll]] for (uint nb = 0; nb < N_BLOCKS; ++nb) {
        [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) {
          const float p = exp2(s[mb * N_BLOCKS + nb][i] - exp2_ref[cm_slot(i)]);
          s[mb * N_BLOCKS + nb][i] = p;
          tile_sum[cm_slot(i)] += p;
        }
      }
      [[unroll]] for (uint t = 0; t < ROWS_PER_LANE; ++t)
        l_part[mb * ROWS_PER_LANE + t] = l_part[mb * ROWS_PER_LANE + t] * alpha[t] + tile_sum[t];
      // rescale O
      [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db)
        [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) o_acc[mb * D_BLOCKS + db][i] *= alpha[cm_slot(i)];
    }

    // O += P V
    [[unroll]] for (uint nb = 0; nb < N_BLOCKS; ++nb) {
      VKF_MAT_A p_frag[M_BLOCKS];
      [[unroll]] for (uint mb = 0; mb < M_BLOCKS; ++mb) p_frag[mb] = acc_to_a(s[mb * N_BLOCKS + nb]);
      [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db) {
        VKF_MAT_B v_frag;
        cm_load_rows(v_frag, kv_tiles, (BLOCK_KV + 16 * nb) * TILE_STRIDE + 2 * db, TILE_STRIDE);
        [[unroll]] for (uint mb = 0; mb < M_BLOCKS; ++mb)
          o_acc[mb * D_BLOCKS + db] = cm_mul_add(p_frag[mb], v_frag, o_acc[mb * D_BLOCKS + db]);
      }
    }
    barrier();  // every subgroup is done with K and V before the next tile overwrites them
  }

  // Epilogue: the sink joins, O = acc / l, LSE = m + log2(l) (finish_row). A row that saw no key:
  // O = 0, LSE = -inf or its sink; a row whose scores held NaN: l is NaN, and so are O and LSE.
  const float sink = sink_log2(head);
  float lse[M_BLOCKS * ROWS_PER_LANE];
  [[unroll]] for (uint mb = 0; mb < M_BLOCKS; ++mb) {
    float o_scale[ROWS_PER_LANE];
    [[unroll]] for (uint t = 0; t < ROWS_PER_LANE; ++t) {
      const uint j = mb * ROWS_PER_LANE + t;
      finish_row(m_run[j], depth_run[j], cm_row_sum(l_part[j]), sink, o_scale[t], lse[j]);
    }
    [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db)
      [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) o_acc[mb * D_BLOCKS + db][i] *= o_scale[cm_slot(i)];
  }

  // Infinities and NaNs of V that the staging zeroed, where the rows see them, read again from the
  // buffer (rare: the flag was raised before the last step's barriers; common/nonfinite.glsl): the
  // row's visible keys in the crossed tiles. Added to the scaled O, as the coopmat2 kernel adds them
  // to the stored one: an inf stays inf where a sink far above every key makes the scale 0.
  if (kv_first < kv_end && nonfinite_v != 0) {
    [[unroll]] for (uint mb = 0; mb < M_BLOCKS; ++mb) {
      [[unroll]] for (uint db = 0; db < D_BLOCKS; ++db) {
        [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) {
          const uint q_row = rows_begin + 16 * mb + cm_row(coord, i), column = 16 * db + cm_col(coord, i);
          const uvec4 keys = crossed_part(crossed, row_keys_begin(q_row, q_len, kv_len), row_keys_end(q_row, q_len, kv_len));
          [[unroll]] for (uint run = 0; run < 2; ++run) {
            for (uint key = keys[2 * run]; key < keys[2 * run + 1]; ++key) {
              const float x = VKF_BUFFER_HALF(v_u4, v_base + key * v_stride + column);
              if (isinf(x) || isnan(x)) o_acc[mb * D_BLOCKS + db][i] += x;
            }
          }
        }
      }
    }
  }

  [[unroll]] for (uint mb = 0; mb < M_BLOCKS; ++mb) {
    const uint row0 = rows_begin + 16 * mb;
    if (ROW_BLOCKS_DIRECT) {
      VKF_STORE_ROW_BLOCK_DIRECT(o_acc, mb * D_BLOCKS, o_u4, o_h, coord, o_base, o_stride, row0, q_len);
    } else {
      VKF_STORE_ROW_BLOCK(o_acc, mb * D_BLOCKS, o_u4, o_base, o_stride, row0, q_len);
    }
    if (WRITE_LSE && (lane & VKF_CM_ROW_LANE_MASK) == 0) {
      [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) {
        const uint r = row0 + cm_row(coord, i);
        if (cm_first_of_slot(i) && r < q_len) {
          lse_data[lse_index(batch, head, seq, r)] = lse[mb * ROWS_PER_LANE + cm_slot(i)] * LN2;
        }
      }
    }
  }
}
