// FlashAttention-2 backward, dQ, on workgroup-scope tensor cores (GL_NV_cooperative_matrix2),
// float16 tensors. One workgroup per (tile of BLOCK_Q queries, head, batch); it keeps Q and dO as
// operands and dQ as accumulator, and streams K and V tiles of BLOCK_KV rows up to the causal
// diagonal:
//   S = Q K^T    P = exp2(scale S - LSE)    dP = dO V^T    dS = P (dP - delta)
//   dQ += dS K   (times scale at the end)
// Each step's K and V rows are staged in shared memory by the whole workgroup and K^T, V^T and K
// loaded from there (attention_backward_dkdv_coopmat2.comp has the numbers, and
// attention_forward_coopmat2.comp says why).
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
layout(constant_id = VKF_SPEC_BLOCK_Q) const uint BLOCK_Q = 64;    // query rows owned
layout(constant_id = VKF_SPEC_BLOCK_KV) const uint BLOCK_KV = 64;  // key rows per streamed tile
layout(constant_id = VKF_SPEC_CAUSAL) const bool CAUSAL = false;

#define NEG_INF uintBitsToFloat(0xff800000u)
#include "common/attention_mask.glsl"

layout(std430, set = 0, binding = VKF_BWD_BINDING_Q) readonly buffer q_block { float16_t q_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_V) readonly buffer v_block { uvec4 v_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DO) readonly buffer do_block { float16_t do_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ) writeonly buffer dq_block { float16_t dq_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };

layout(push_constant) uniform PushBlock { AttentionPush pc; };

#include "common/coopmat2_backward.glsl"

const uint WORKGROUP_SIZE = gl_WorkGroupSize.x;
const uint ROW_U4 = HEAD_DIM / 8;      // a row of float16 as uvec4 words
const uint TILE_STRIDE = ROW_U4 + 1;   // padded shared row (see stage_rows.glsl)
shared uvec4 kv_tiles[2 * BLOCK_KV * TILE_STRIDE];  // K rows [0, BLOCK_KV), then V rows
#include "common/stage_rows.glsl"
const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_kv, store_kv, kv_tiles, k_u4, v_u4, BLOCK_KV, KV_WORDS)

#define QUERIES_X_DIM(T, USE) coopmat<T, gl_ScopeWorkgroup, BLOCK_Q, HEAD_DIM, USE>
#define QUERIES_X_KEYS(T, USE) coopmat<T, gl_ScopeWorkgroup, BLOCK_Q, BLOCK_KV, USE>
#define DIM_X_KEYS_B coopmat<float16_t, gl_ScopeWorkgroup, HEAD_DIM, BLOCK_KV, gl_MatrixUseB>

void main() {
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);  // GQA / MQA
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  const uint q_end = min(q_begin + BLOCK_Q, pc.q_len);
  const uint head_row = (batch * pc.q_heads + head) * pc.q_len;  // row index of query 0 of this head
  const uint q_offset = head_row * HEAD_DIM;                       // in halves
  const uint kv_head_row = (batch * pc.kv_heads + kv_head) * pc.kv_len;  // row index of key 0 of this head

  // [q_len, HEAD_DIM] row-major; reads past the last row give 0, writes there are dropped.
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> q_layout =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  q_layout = setTensorLayoutDimensionNV(q_layout, pc.q_len, HEAD_DIM);

  QUERIES_X_DIM(float16_t, gl_MatrixUseA) q_tile, do_tile;
  coopMatLoadTensorNV(q_tile, q_h, q_offset, sliceTensorLayoutNV(q_layout, q_begin, BLOCK_Q, 0, HEAD_DIM));
  coopMatLoadTensorNV(do_tile, do_h, q_offset, sliceTensorLayoutNV(q_layout, q_begin, BLOCK_Q, 0, HEAD_DIM));
  QUERIES_X_DIM(float, gl_MatrixUseAccumulator) dq_acc = QUERIES_X_DIM(float, gl_MatrixUseAccumulator)(0.0);

  // LSE (base 2) and delta of the rows, loaded once as matrices whose columns repeat the row's
  // value (column stride 0). Rows past q_len read LSE +inf (P = 0) and delta 0.
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> delta_layout =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  delta_layout = setTensorLayoutDimensionNV(delta_layout, pc.q_len, BLOCK_KV);
  delta_layout = setTensorLayoutStrideNV(delta_layout, 1, 0);
  const tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lse_layout =
      setTensorLayoutClampValueNV(delta_layout, floatBitsToUint(POS_INF));
  QUERIES_X_KEYS(float, gl_MatrixUseAccumulator) lse_rows, delta_rows;
  coopMatLoadTensorNV(lse_rows, lse_data, head_row, sliceTensorLayoutNV(lse_layout, q_begin, BLOCK_Q, 0, BLOCK_KV));
  coopMatLoadTensorNV(delta_rows, delta_data, head_row, sliceTensorLayoutNV(delta_layout, q_begin, BLOCK_Q, 0, BLOCK_KV));
  lse_rows *= LOG2E;

  const uint kv_end = visible_kv_end(q_begin, q_end, pc.q_len, pc.kv_len);  // later tiles are wholly masked
  [[dont_unroll]] for (uint kv_begin = 0; kv_begin < kv_end; kv_begin += BLOCK_KV) {
    // stage this step's K and V rows (read before the barrier, as in the forward)
    uvec4 k_words[KV_WORDS], v_words[KV_WORDS];
    load_kv(k_words, v_words, kv_head_row + kv_begin, min(BLOCK_KV, pc.kv_len - kv_begin));
    barrier();
    store_kv(k_words, v_words);
    barrier();

    // S = Q K^T, P = exp2(scale S - LSE)
    DIM_X_KEYS_B k_t;
    coopMatLoad(k_t, kv_tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
    QUERIES_X_KEYS(float, gl_MatrixUseAccumulator) p =
        coopMatMulAdd(q_tile, k_t, QUERIES_X_KEYS(float, gl_MatrixUseAccumulator)(0.0));
    if (tile_needs_mask(q_begin, kv_begin, BLOCK_KV, pc.q_len, pc.kv_len)) {
      coopMatPerElementNV(p, p, masked_p_of_s, lse_rows, q_begin, kv_begin);
    } else {  // (a row whose LSE is -inf sees no key: all its tiles are masked)
      [[unroll]] for (uint i = 0; i < p.length(); ++i) p[i] = exp2(p[i] * pc.scale_log2 - lse_rows[i]);
    }

    // dP = dO V^T, dS = P (dP - delta)
    DIM_X_KEYS_B v_t;
    coopMatLoad(v_t, kv_tiles, BLOCK_KV * TILE_STRIDE, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
    QUERIES_X_KEYS(float, gl_MatrixUseAccumulator) ds =
        coopMatMulAdd(do_tile, v_t, QUERIES_X_KEYS(float, gl_MatrixUseAccumulator)(0.0));
    [[unroll]] for (uint i = 0; i < ds.length(); ++i) ds[i] = p[i] * (ds[i] - delta_rows[i]);

    // dQ += dS K
    coopmat<float16_t, gl_ScopeWorkgroup, BLOCK_KV, HEAD_DIM, gl_MatrixUseB> k_tile;
    coopMatLoad(k_tile, kv_tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    dq_acc = coopMatMulAdd(QUERIES_X_KEYS(float16_t, gl_MatrixUseA)(ds), k_tile, dq_acc);
  }

  dq_acc *= pc.scale_log2 / LOG2E;
  coopMatStoreTensorNV(QUERIES_X_DIM(float16_t, gl_MatrixUseAccumulator)(dq_acc), dq_h, q_offset,
                       sliceTensorLayoutNV(q_layout, q_begin, BLOCK_Q, 0, HEAD_DIM));
}
