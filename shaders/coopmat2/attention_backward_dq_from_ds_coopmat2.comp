// FlashAttention-2 backward, dQ = scale dS K from the dS that the dK/dV kernel stored (its
// VKF_STORE_DS build; deterministic = false): one matrix product per tile pair instead of the dQ
// kernel's three (attention_backward_dq_coopmat2.comp recomputes S, P, dP and dS). float16 tensors.
// One workgroup per (tile of BLOCK_Q queries, query head of the chunk); subgroup g owns queries
// [R g, R g + R) of the tile (R = SUBGROUP_ROWS) and keeps their dQ as an accumulator, and the key
// tiles of BLOCK_KV rows that the rows' band reaches stream through: K rows and the tile's dS^T
// rows (keys x queries, from the chunk's workspace slot) are staged in shared memory by the whole
// workgroup, and each subgroup loads its queries' dS from dS^T column-major.
// The slot holds what the dK/dV kernel wrote for the query tiles it visited: every pair of a tile
// that no edge of the band cuts, stale bytes elsewhere. So tiles that an edge cuts select dS = 0 for
// the pairs a row does not see (a select: stale bytes may be NaN), and where the edge crosses them
// zero K's infinities and NaNs and give NaN where a row sees such a key, as the dQ kernel does
// (common/nonfinite.glsl). No mask (the engine stores dS only for calls without one).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require

#define VKF_DEFAULT_HEAD_DIM 128
#define VKF_DEFAULT_BLOCK_Q 64   // query rows owned: SUBGROUP_ROWS per subgroup
#define VKF_DEFAULT_BLOCK_KV 64  // key rows per streamed tile
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_SUBGROUP_SIZE) const uint SUBGROUP_SIZE = 32;

#include "common/attention_mask.glsl"

layout(std430, set = 0, binding = VKF_BWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ) writeonly buffer dq_block { float16_t dq_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ_STATE) readonly buffer ds_block { uvec4 ds_u4[]; };

#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"  // strides are multiples of 8 elements here (the engine checks)
#include "common/constants.glsl"
#include "coopmat2/stored_ds.glsl"

const uint SUBGROUP_ROWS = BLOCK_Q / (WORKGROUP_SIZE / SUBGROUP_SIZE);  // rows each subgroup owns (16 or 32)
const uint ROW_U4 = VKF_ROW_U4(HEAD_DIM);          // a row of float16 as uvec4 words
const uint TILE_STRIDE = VKF_TILE_STRIDE(ROW_U4);  // padded shared row (see stage_rows.glsl)
const uint DS_ROW_U4 = BLOCK_Q / 8;                // a key's dS^T row of the tile's queries
const uint DS_STRIDE = VKF_TILE_STRIDE(DS_ROW_U4);
shared uvec4 k_tile[VKF_SMEM_CM2_DQ_FROM_DS_ROWS_U4(BLOCK_KV, TILE_STRIDE)];
shared uvec4 ds_tile[VKF_SMEM_CM2_DQ_FROM_DS_ROWS_U4(BLOCK_KV, DS_STRIDE)];
// Step (from 1) at which the staging last zeroed an inf or NaN in this row of the key tile.
shared uint key_nonfinite_step[VKF_SMEM_NONFINITE_STEPS(BLOCK_KV)];
#include "common/nonfinite.glsl"
#include "common/stage_rows.glsl"
const uint K_WORDS = VKF_STAGE_WORDS_OF(BLOCK_KV, ROW_U4);
const uint DS_WORDS = VKF_STAGE_WORDS_OF(BLOCK_KV, DS_ROW_U4);
VKF_DEFINE_STAGE_ROWS_SPLIT_AT(load_k, store_k, k_tile, 0, TILE_STRIDE, k_u4, BLOCK_KV, ROW_U4, K_WORDS)
VKF_DEFINE_STAGE_ROWS_SPLIT_AT(load_ds, store_ds, ds_tile, 0, DS_STRIDE, ds_u4, BLOCK_KV, DS_ROW_U4, DS_WORDS)

#define QUERIES_X_DIM(T, USE) coopmat<T, gl_ScopeSubgroup, SUBGROUP_ROWS, HEAD_DIM, USE>
#define QUERIES_X_KEYS(T, USE) coopmat<T, gl_ScopeSubgroup, SUBGROUP_ROWS, BLOCK_KV, USE>

// Callback of a tile that an edge of the band cuts: row is a query of the subgroup's rows (the
// first at q0), col a key of the step's tile (the first at k0).
float16_t masked_stored_ds(const uint row, const uint col, const float16_t ds, const uint q0, const uint k0,
                           const uint step, const uint q_len, const uint kv_len) {
  if (!key_visible(q0 + row, k0 + col, q_len, kv_len)) return float16_t(0.0);
  return key_nonfinite_step[col] == step ? float16_t(VKF_NAN) : ds;
}

// One step of the key loop: stage the key tile at kv_begin (K and the slot's dS^T rows), dQ += dS K.
// `masked` steps are the tiles the band's edges or kv_len cut (main() runs them in loops of their
// own, as the dQ kernel does). q_begin: the workgroup's first query; ds_base: where its columns of
// the slot's dS^T start (uvec4 words).
void dq_step(const bool masked, const uint kv_begin, const uint step, const uint q_begin, const uint q_rows,
             const uint own_row, const uint q_len, const uint kv_len, const uint k_base, const uint ds_base,
             inout QUERIES_X_DIM(float, gl_MatrixUseAccumulator) dq_acc) {
  const uint k_stride = tensor_row_stride(VKF_TENSOR_K) / 8, ds_stride = stored_ds_stride() / 8;
  uvec4 k_words[K_WORDS], ds_words[DS_WORDS];
  load_k(k_words, k_base / 8 + kv_begin * k_stride, k_stride, min(BLOCK_KV, kv_len - kv_begin));
  load_ds(ds_words, ds_base + kv_begin * ds_stride, ds_stride, BLOCK_KV);
  barrier();  // every subgroup is done with the last step's tiles
  if (masked && tile_crosses_band(q_begin, q_rows, kv_begin, BLOCK_KV, q_len, kv_len)) {
    VKF_ZERO_NONFINITE_ROWS(k_words, K_WORDS, key_nonfinite_step, step);
  }
  store_k(k_words);
  store_ds(ds_words);
  barrier();

  QUERIES_X_KEYS(float16_t, gl_MatrixUseA) ds;
  coopMatLoad(ds, ds_tile, own_row / 8, DS_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
  if (masked) coopMatPerElementNV(ds, ds, masked_stored_ds, q_begin + own_row, kv_begin, step, q_len, kv_len);
  coopmat<float16_t, gl_ScopeSubgroup, BLOCK_KV, HEAD_DIM, gl_MatrixUseB> k_rows;
  coopMatLoad(k_rows, k_tile, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
  dq_acc = coopMatMulAdd(ds, k_rows, dq_acc);
}

void main() {
  // Dispatched over the query heads of a chunk of (batch, KV head) pairs (pair pc.chunk_begin on),
  // as the dK/dV kernel that stored the chunk's slots: slot gl_WorkGroupID.y.
  const uint group = pc.q_heads / pc.kv_heads;
  const uint q_head_index = pc.chunk_begin * group + gl_WorkGroupID.y;
  const uint head = q_head_index % pc.q_heads, batch = q_head_index / pc.q_heads;
  const uint kv_head = head / group;
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  if (q_begin >= q_len) return;  // past this batch entry's queries
  const uint q_end = min(q_begin + BLOCK_Q, q_len);
  const uint own_row = SUBGROUP_ROWS * gl_SubgroupID;  // this subgroup's first query inside the tile
  const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0);  // dQ has Q's strides
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0);
  const uint ds_base = (stored_ds_slot(gl_WorkGroupID.y) + q_begin) / 8;
  QUERIES_X_DIM(float, gl_MatrixUseAccumulator) dq_acc = QUERIES_X_DIM(float, gl_MatrixUseAccumulator)(0.0);
  for (uint i = gl_LocalInvocationIndex; i < BLOCK_KV; i += WORKGROUP_SIZE) key_nonfinite_step[i] = 0;

  // The key tiles the dQ kernel visits, in the same loops: cut tiles of the band's left edge
  // (WINDOW_LEFT) first, then whole ones, then those of its right edge and kv_len.
  const uint q_rows = q_end - q_begin;
  const uint kv_end = visible_kv_end(q_begin, q_end, q_len, kv_len);
  uint kv_begin = first_visible_kv_tile(q_begin, BLOCK_KV, q_len, kv_len), step = 1;
  if (WINDOW_LEFT) {
    [[dont_unroll]] for (; kv_begin < kv_end && tile_needs_mask(q_begin, q_rows, kv_begin, BLOCK_KV, q_len, kv_len);
                         kv_begin += BLOCK_KV, ++step) {
      dq_step(true, kv_begin, step, q_begin, q_rows, own_row, q_len, kv_len, k_base, ds_base, dq_acc);
    }
  }
  [[dont_unroll]] for (; kv_begin < kv_end && !tile_needs_mask(q_begin, q_rows, kv_begin, BLOCK_KV, q_len, kv_len);
                       kv_begin += BLOCK_KV, ++step) {
    dq_step(false, kv_begin, step, q_begin, q_rows, own_row, q_len, kv_len, k_base, ds_base, dq_acc);
  }
  [[dont_unroll]] for (; kv_begin < kv_end; kv_begin += BLOCK_KV, ++step) {
    dq_step(true, kv_begin, step, q_begin, q_rows, own_row, q_len, kv_len, k_base, ds_base, dq_acc);
  }

  // [q_len, HEAD_DIM] with Q's row stride: writes past the last row are dropped.
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> dq_layout =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  dq_layout = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(dq_layout, q_len, HEAD_DIM),
                                      tensor_row_stride(VKF_TENSOR_Q), 1);
  dq_acc *= pc.scale_log2 / LOG2E;
  coopMatStoreTensorNV(QUERIES_X_DIM(float16_t, gl_MatrixUseAccumulator)(dq_acc), dq_h, q_base,
                       sliceTensorLayoutNV(dq_layout, q_begin + own_row, SUBGROUP_ROWS, 0, HEAD_DIM));
}
