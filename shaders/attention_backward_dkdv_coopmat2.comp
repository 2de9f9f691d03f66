// FlashAttention-2 backward, dK and dV, on workgroup-scope tensor cores (GL_NV_cooperative_matrix2),
// float16 tensors. One workgroup per (tile of BLOCK_KV keys, kv head, batch); it keeps dK and dV
// as accumulators, and streams Q and dO tiles of BLOCK_Q rows for every query head of the GQA
// group, from the causal diagonal on:
//   S^T = K Q^T      P^T = exp2(scale S^T - LSE)   dV += P^T dO
//   dP^T = V dO^T    dS^T = P^T (dP^T - delta)     dK += dS^T Q   (times scale at the end)
// Deterministic: every key row is summed by one workgroup in a fixed order, no atomics.
// Its own K and V rows are staged once through shared memory and then held as operands for the
// whole loop; each step's Q and dO rows are staged by the whole workgroup in the same shared
// array, and Q^T, dO, dO^T and Q loaded from there when a product needs them. Measured on the H100
// (whole backward, the dQ kernel staging K and V the same way; attention_forward_coopmat2.comp
// says why staging pays):
// - K and V loaded from the buffers and held as operands (at the tiles of then): past 255
//   registers, into spills; reloading them from the buffers at every step made D=128 94 -> 103
//   TFLOP/s, D=64 103 -> 112;
// - staging Q and dO: D=128 103 -> 131, D=64 112 -> 145;
// - K and V reloaded from shared memory at every step: D=64 145 -> 160, D=128 (32x32 tiles,
//   the only ones that fit beside them) 134;
// - K and V staged once and held (32 keys x 64 queries: 255 registers, no spill, 36 KB): D=128
//   137 -> 154, causal 131 -> 146; D=64 165 -> 167 (64x64).
// - each step's buffer reads (Q, dO, LSE, delta) issued before the barrier that waits for the
//   previous step's matrix loads, the shared-memory stores after it (the dQ kernel likewise):
//   D=128 152 -> 164, causal 145 -> 154, D=64 165 -> 177. LSE and delta early alone: 152 -> 158.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require

#include "common/shader_interface.h"

layout(local_size_x_id = VKF_SPEC_WORKGROUP_SIZE) in;
layout(constant_id = VKF_SPEC_HEAD_DIM) const uint HEAD_DIM = 128;
layout(constant_id = VKF_SPEC_BLOCK_Q) const uint BLOCK_Q = 64;    // query rows per streamed tile
layout(constant_id = VKF_SPEC_BLOCK_KV) const uint BLOCK_KV = 64;  // key rows owned
layout(constant_id = VKF_SPEC_CAUSAL) const bool CAUSAL = false;

#define NEG_INF uintBitsToFloat(0xff800000u)
#include "common/attention_mask.glsl"

layout(std430, set = 0, binding = VKF_BWD_BINDING_Q) readonly buffer q_block { uvec4 q_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_V) readonly buffer v_block { uvec4 v_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DO) readonly buffer do_block { uvec4 do_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DK) writeonly buffer dk_block { float16_t dk_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DV) writeonly buffer dv_block { float16_t dv_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };

layout(push_constant) uniform PushBlock { AttentionPush pc; };

#include "common/coopmat2_backward.glsl"

const uint WORKGROUP_SIZE = gl_WorkGroupSize.x;
const uint ROW_U4 = HEAD_DIM / 8;      // a row of float16 as uvec4 words
const uint TILE_STRIDE = ROW_U4 + 1;   // padded shared row (see stage_rows.glsl)
// First the own K rows [0, BLOCK_KV) and V rows, once; then each step's Q rows [0, BLOCK_Q) and dO rows.
const uint STAGED_ROWS = BLOCK_Q > BLOCK_KV ? BLOCK_Q : BLOCK_KV;
shared uvec4 tiles[2 * STAGED_ROWS * TILE_STRIDE];
const uint V_ROWS = BLOCK_KV * TILE_STRIDE;  // where the V rows start
const uint DO_TILE = BLOCK_Q * TILE_STRIDE;  // where the dO rows start
#include "common/stage_rows.glsl"
const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_kv, store_kv, tiles, k_u4, v_u4, BLOCK_KV, KV_WORDS)
VKF_DEFINE_STAGE_ROW_PAIR(stage_kv, load_kv, store_kv, KV_WORDS)
const uint Q_DO_WORDS = VKF_STAGE_WORDS(BLOCK_Q);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_q_do, store_q_do, tiles, q_u4, do_u4, BLOCK_Q, Q_DO_WORDS)

#define KEYS_X_DIM(T, USE) coopmat<T, gl_ScopeWorkgroup, BLOCK_KV, HEAD_DIM, USE>
#define KEYS_X_QUERIES(T, USE) coopmat<T, gl_ScopeWorkgroup, BLOCK_KV, BLOCK_Q, USE>
#define QUERIES_X_DIM_B coopmat<float16_t, gl_ScopeWorkgroup, BLOCK_Q, HEAD_DIM, gl_MatrixUseB>
#define DIM_X_QUERIES_B coopmat<float16_t, gl_ScopeWorkgroup, HEAD_DIM, BLOCK_Q, gl_MatrixUseB>

void main() {
  const uint kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_begin = gl_WorkGroupID.x * BLOCK_KV;
  const uint kv_head_row = (batch * pc.kv_heads + kv_head) * pc.kv_len;  // row index of key 0 of this head
  const uint kv_offset = kv_head_row * HEAD_DIM;                          // in halves

  // [kv_len, HEAD_DIM] row-major, for the dK / dV stores: rows past kv_len are dropped.
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> kv_layout =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  kv_layout = setTensorLayoutDimensionNV(kv_layout, pc.kv_len, HEAD_DIM);

  KEYS_X_DIM(float, gl_MatrixUseAccumulator) dk_acc = KEYS_X_DIM(float, gl_MatrixUseAccumulator)(0.0);
  KEYS_X_DIM(float, gl_MatrixUseAccumulator) dv_acc = KEYS_X_DIM(float, gl_MatrixUseAccumulator)(0.0);

  // LSE (base 2 once scaled) and delta of a tile's queries, as matrices whose rows repeat them
  // (row stride 0); queries past q_len read LSE +inf (P = 0) and delta 0.
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> delta_layout =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  delta_layout = setTensorLayoutDimensionNV(delta_layout, BLOCK_KV, pc.q_len);
  delta_layout = setTensorLayoutStrideNV(delta_layout, 0, 1);
  const tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lse_layout =
      setTensorLayoutClampValueNV(delta_layout, floatBitsToUint(POS_INF));

  // Query rows before q_first see none of this tile's keys (causal): their tiles are skipped.
  uint q_first = 0;
  if (CAUSAL) q_first = uint(clamp(int(kv_begin) - causal_shift(pc.q_len, pc.kv_len), 0, int(pc.q_len)));
  // The own K and V, held as operands; the first step's barrier keeps its staging off them.
  stage_kv(kv_head_row + kv_begin, min(BLOCK_KV, pc.kv_len - kv_begin));
  barrier();
  KEYS_X_DIM(float16_t, gl_MatrixUseA) k_tile, v_tile;
  coopMatLoad(k_tile, tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(v_tile, tiles, V_ROWS, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);

  const uint group = pc.q_heads / pc.kv_heads;
  for (uint head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    const uint head_row = (batch * pc.q_heads + head) * pc.q_len;  // row index of query 0 of this head
    [[dont_unroll]] for (uint q_begin = (q_first / BLOCK_Q) * BLOCK_Q; q_begin < pc.q_len; q_begin += BLOCK_Q) {
      // This step's LSE and delta, and its Q and dO rows, read from the buffers while waiting for
      // every matrix load of the previous step; then the rows are stored to shared memory.
      KEYS_X_QUERIES(float, gl_MatrixUseAccumulator) lse_cols, delta_cols;
      coopMatLoadTensorNV(lse_cols, lse_data, head_row, sliceTensorLayoutNV(lse_layout, 0, BLOCK_KV, q_begin, BLOCK_Q));
      coopMatLoadTensorNV(delta_cols, delta_data, head_row, sliceTensorLayoutNV(delta_layout, 0, BLOCK_KV, q_begin, BLOCK_Q));
      uvec4 q_words[Q_DO_WORDS], do_words[Q_DO_WORDS];
      load_q_do(q_words, do_words, head_row + q_begin, min(BLOCK_Q, pc.q_len - q_begin));
      barrier();
      store_q_do(q_words, do_words);
      barrier();

      // S^T = K Q^T, P^T = exp2(scale S^T - LSE)
      DIM_X_QUERIES_B q_t;
      coopMatLoad(q_t, tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
      KEYS_X_QUERIES(float, gl_MatrixUseAccumulator) p_t =
          coopMatMulAdd(k_tile, q_t, KEYS_X_QUERIES(float, gl_MatrixUseAccumulator)(0.0));
      lse_cols *= LOG2E;
      if (tile_needs_mask(q_begin, kv_begin, BLOCK_KV, pc.q_len, pc.kv_len)) {
        coopMatPerElementNV(p_t, p_t, masked_p_of_st, lse_cols, q_begin, kv_begin);
      } else {  // (a query whose LSE is -inf sees no key: all its tiles are masked)
        [[unroll]] for (uint i = 0; i < p_t.length(); ++i) p_t[i] = exp2(p_t[i] * pc.scale_log2 - lse_cols[i]);
      }

      // dV += P^T dO
      QUERIES_X_DIM_B do_tile;
      coopMatLoad(do_tile, tiles, DO_TILE, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
      dv_acc = coopMatMulAdd(KEYS_X_QUERIES(float16_t, gl_MatrixUseA)(p_t), do_tile, dv_acc);

      // dP^T = V dO^T, dS^T = P^T (dP^T - delta)
      DIM_X_QUERIES_B do_t;
      coopMatLoad(do_t, tiles, DO_TILE, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
      KEYS_X_QUERIES(float, gl_MatrixUseAccumulator) ds_t =
          coopMatMulAdd(v_tile, do_t, KEYS_X_QUERIES(float, gl_MatrixUseAccumulator)(0.0));
      [[unroll]] for (uint i = 0; i < ds_t.length(); ++i) ds_t[i] = p_t[i] * (ds_t[i] - delta_cols[i]);

      // dK += dS^T Q
      QUERIES_X_DIM_B q_tile;
      coopMatLoad(q_tile, tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
      dk_acc = coopMatMulAdd(KEYS_X_QUERIES(float16_t, gl_MatrixUseA)(ds_t), q_tile, dk_acc);
    }
  }

  dk_acc *= pc.scale_log2 / LOG2E;
  coopMatStoreTensorNV(KEYS_X_DIM(float16_t, gl_MatrixUseAccumulator)(dk_acc), dk_h, kv_offset,
                       sliceTensorLayoutNV(kv_layout, kv_begin, BLOCK_KV, 0, HEAD_DIM));
  coopMatStoreTensorNV(KEYS_X_DIM(float16_t, gl_MatrixUseAccumulator)(dv_acc), dv_h, kv_offset,
                       sliceTensorLayoutNV(kv_layout, kv_begin, BLOCK_KV, 0, HEAD_DIM));
}
