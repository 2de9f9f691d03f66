// FlashAttention-2 backward, dQ, on tensor cores with GL_NV_cooperative_matrix2's per-element
// operations and conversions, float16 tensors. One workgroup per (tile of BLOCK_Q queries, head,
// batch); subgroup g owns queries [R g, R g + R) of the tile (R = SUBGROUP_ROWS, 16 or 32), keeps
// their Q and dO as operands and dQ as accumulator, and the K and V tiles of BLOCK_KV rows that
// the rows' band reaches stream through:
//   S = Q K^T    P = exp2(scale S - LSE)    dP = dO V^T    dS = P (dP - delta)
//   dQ += dS K   (times scale at the end)
// Subgroup-scope matrices, as in attention_backward_dkdv_coopmat2.comp (which says why): each
// subgroup's dS is already laid out as the A operand of its dQ product, where the workgroup-scope
// kernel before it exchanged dS between subgroups through shared memory every step (64 x 32 S
// split two by two), which was slower; 32 rows per subgroup, where registers allow it (D=64), are
// faster again (docs/tuning-log.md). Each step's K and V rows are staged in shared memory by the
// whole workgroup and K^T, V^T and K loaded from there (attention_forward_coopmat2.comp says why
// staging pays); the owned rows' LSE and delta sit in shared memory for the per-element callbacks.
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
#define VKF_DEFAULT_BLOCK_KV 32   // key rows per streamed tile
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_SUBGROUP_SIZE) const uint SUBGROUP_SIZE = 32;

#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_BWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_BWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_BWD_BINDING_MASK_TILES
#define VKF_SCORE_MOD_BIAS_TILES
#include "common/score_mod.glsl"

layout(std430, set = 0, binding = VKF_BWD_BINDING_Q) readonly buffer q_block { float16_t q_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_V) readonly buffer v_block { uvec4 v_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DO) readonly buffer do_block { float16_t do_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ) writeonly buffer dq_block { float16_t dq_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ) writeonly buffer dq_u4_block { uvec4 dq_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };

#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"  // strides are multiples of 8 elements here (the engine checks)
#include "coopmat2/coopmat2_backward.glsl"

const uint SUBGROUP_ROWS = BLOCK_Q / (WORKGROUP_SIZE / SUBGROUP_SIZE);  // rows each subgroup owns (16 or 32)
const uint ROW_U4 = VKF_ROW_U4(HEAD_DIM);          // a row of float16 as uvec4 words
const uint TILE_STRIDE = VKF_TILE_STRIDE(ROW_U4);  // padded shared row (see stage_rows.glsl)
shared uvec4 kv_tiles[VKF_SMEM_ROW_PAIR_U4(BLOCK_KV, TILE_STRIDE)];  // K rows [0, BLOCK_KV), then V rows
shared float lse_rows[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];    // row_lse_log2 of the owned queries
shared float delta_rows[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];  // row_delta
// Step (from 1) at which the staging last zeroed an inf or NaN in this row of the key tile: in
// tiles that the band's edge crosses, K is zeroed for dQ += dS K (common/nonfinite.glsl).
shared uint key_nonfinite_step[VKF_SMEM_NONFINITE_STEPS(BLOCK_KV)];
#include "common/nonfinite.glsl"
#include "common/stage_rows.glsl"
const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_kv, store_kv, kv_tiles, k_u4, v_u4, BLOCK_KV, KV_WORDS)
// dQ leaves through the K/V tiles where they hold its rows: a matrix store there and 16-byte copies
// out (docs/tuning-log.md, "outputs through shared memory").
const bool DQ_THROUGH_TILES = BLOCK_Q <= 2 * BLOCK_KV;
VKF_DEFINE_UNSTAGE_ROWS(store_dq_rows, kv_tiles, dq_u4, BLOCK_Q)

#define QUERIES_X_DIM(T, USE) coopmat<T, gl_ScopeSubgroup, SUBGROUP_ROWS, HEAD_DIM, USE>
#define QUERIES_X_KEYS(T, USE) coopmat<T, gl_ScopeSubgroup, SUBGROUP_ROWS, BLOCK_KV, USE>
#define DIM_X_KEYS_B coopmat<float16_t, gl_ScopeSubgroup, HEAD_DIM, BLOCK_KV, gl_MatrixUseB>
#include "coopmat2/bias_tiles.glsl"
VKF_DEFINE_BIAS_TILE(bias_tile, gl_ScopeSubgroup, SUBGROUP_ROWS, BLOCK_KV)

// Callbacks: row is a query of the subgroup's rows (tile row q_row0 + row, the first at q0), col
// a key of the step's tile (the first at k0); q_len and kv_len are the sequence's.
float p_of_s(const uint row, const uint col, const float s, const uint q_row0, const uint q0, const uint k0,
             const uint q_len, const uint kv_len, const ScoreHead modifiers) {
  return p_of_score(s, lse_rows[q_row0 + row], modifiers, q0 + row, k0 + col, q_len, kv_len);
}
float masked_p_of_s(const uint row, const uint col, const float s, const uint q_row0, const uint q0, const uint k0,
                    const uint q_len, const uint kv_len, const ScoreHead modifiers) {
  return masked_p(q0 + row, k0 + col, s, lse_rows[q_row0 + row], modifiers, q_len, kv_len);
}
// dS = P (dP - delta)
float ds_of_dp(const uint row, const uint col, const float dp, const float p, const uint q_row0, const uint q0,
               const uint k0, const uint q_len, const uint kv_len, const ScoreHead modifiers) {
  return ds_of(p, dp, delta_rows[q_row0 + row], lse_rows[q_row0 + row], modifiers, q0 + row, k0 + col, q_len, kv_len);
}
// In a tile that crosses the mask, also NaN where the row sees a key whose K the staging zeroed at
// this step (common/nonfinite.glsl).
float masked_ds_of_dp(const uint row, const uint col, const float dp, const float p, const uint q_row0, const uint q0,
                      const uint k0, const uint step, const uint q_len, const uint kv_len, const ScoreHead modifiers) {
  const float ds = masked_ds(q0 + row, k0 + col, p, dp, delta_rows[q_row0 + row], lse_rows[q_row0 + row], modifiers,
                             q_len, kv_len);
  return key_nonfinite_step[col] == step && key_visible(q0 + row, k0 + col, q_len, kv_len) ? VKF_NAN : ds;
}

// One step of the key loop: stage the key tile at kv_begin, recompute P, dS = P (dP - delta),
// dQ += dS K. `masked` steps (tiles that the band's edges or kv_len cut: the last of the loop, and
// with WINDOW_LEFT the first) also mask P and dS, and where the band's edge crosses them zero K's
// infinities and NaNs; main() runs them in loops of their own, so that the loop over the other
// tiles carries none of that code (on the H100 that is 2-4% faster at D=64 than one loop that tests
// each tile: docs/tuning-log.md). q_rows: the tile's rows below q_len. k_base, v_base: elements
// where the KV head's key 0 starts in K and V.
void dq_step(const bool masked, const uint kv_begin, const uint step, const uint q_begin, const uint q_rows,
             const uint own_row, const ScoreHead modifiers, const uint mask_summary,
             inout MaskWalk closed_keys, const uint q_len,
             const uint kv_len, const uint k_base, const uint v_base,
             const QUERIES_X_DIM(float16_t, gl_MatrixUseA) q_frag,
             const QUERIES_X_DIM(float16_t, gl_MatrixUseA) do_frag,
             inout QUERIES_X_DIM(float, gl_MatrixUseAccumulator) dq_acc) {
  if (mask_closes_keys(closed_keys, mask_summary, q_begin, q_begin + q_rows, kv_begin, min(kv_begin + BLOCK_KV, kv_len))) {
    return;  // the mask closes the tile (the same in the whole workgroup)
  }
  // stage this step's K and V rows (read before the barrier, as in the forward), zeroing K's
  // infinities and NaNs where the band's edge crosses the tile
  uvec4 k_words[KV_WORDS], v_words[KV_WORDS];
  const uint k_stride = tensor_row_stride(VKF_TENSOR_K), v_stride = tensor_row_stride(VKF_TENSOR_V);
  load_kv(k_words, v_words, (k_base + kv_begin * k_stride) / 8, k_stride / 8, (v_base + kv_begin * v_stride) / 8,
          v_stride / 8, min(BLOCK_KV, kv_len - kv_begin));
  barrier();
  if (masked && tile_crosses_band(q_begin, q_rows, kv_begin, BLOCK_KV, q_len, kv_len)) {
    VKF_ZERO_NONFINITE_ROWS(k_words, KV_WORDS, key_nonfinite_step, step);
  }
  store_kv(k_words, v_words);
  barrier();

  // S = Q K^T, P = exp2(scale S - LSE)
  DIM_X_KEYS_B k_t;
  coopMatLoad(k_t, kv_tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
  QUERIES_X_KEYS(float, gl_MatrixUseAccumulator) p =
      coopMatMulAdd(q_frag, k_t, QUERIES_X_KEYS(float, gl_MatrixUseAccumulator)(0.0));
  if (bias_tiles()) {  // scaled here, the bias added as a matrix (p_of_score knows)
    p = p * pc.scale_log2 + bias_tile(modifiers.mask_base, q_begin + own_row, kv_begin);
  }
  if (masked) {
    coopMatPerElementNV(p, p, masked_p_of_s, own_row, q_begin + own_row, kv_begin, q_len, kv_len, modifiers);
  } else {
    coopMatPerElementNV(p, p, p_of_s, own_row, q_begin + own_row, kv_begin, q_len, kv_len, modifiers);
  }

  // dP = dO V^T, dS = P (dP - delta)
  DIM_X_KEYS_B v_t;
  coopMatLoad(v_t, kv_tiles, BLOCK_KV * TILE_STRIDE, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
  QUERIES_X_KEYS(float, gl_MatrixUseAccumulator) ds =
      coopMatMulAdd(do_frag, v_t, QUERIES_X_KEYS(float, gl_MatrixUseAccumulator)(0.0));
  if (masked) {  // 0 for masked pairs whatever dP holds (an inf in V)
    coopMatPerElementNV(ds, ds, masked_ds_of_dp, p, own_row, q_begin + own_row, kv_begin, step, q_len, kv_len,
                        modifiers);
  } else {
    coopMatPerElementNV(ds, ds, ds_of_dp, p, own_row, q_begin + own_row, kv_begin, q_len, kv_len, modifiers);
  }

  // dQ += dS K
  coopmat<float16_t, gl_ScopeSubgroup, BLOCK_KV, HEAD_DIM, gl_MatrixUseB> k_tile;
  coopMatLoad(k_tile, kv_tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
  dq_acc = coopMatMulAdd(QUERIES_X_KEYS(float16_t, gl_MatrixUseA)(ds), k_tile, dq_acc);
}

void main() {
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);  // GQA / MQA
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  if (q_begin >= q_len) return;  // past this batch entry's queries
  const uint q_end = min(q_begin + BLOCK_Q, q_len);
  const uint own_row = SUBGROUP_ROWS * gl_SubgroupID;  // this subgroup's first query inside the tile
  // Element offsets of each tensor's row 0 of this head (dQ has Q's strides).
  const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0);
  const uint do_base = tensor_base(VKF_TENSOR_DO, batch, head, seq.q_row0);
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0);
  const ScoreHead modifiers = score_head(batch, head);
  const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes

  // [q_len, HEAD_DIM] with the tensors' row strides; reads past the last row give 0, and the
  // tensor-layout store of dQ (where the K/V tiles cannot hold its rows) drops writes there.
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> rows_layout =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  rows_layout = setTensorLayoutDimensionNV(rows_layout, q_len, HEAD_DIM);
  const tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> q_layout =
      setTensorLayoutStrideNV(rows_layout, tensor_row_stride(VKF_TENSOR_Q), 1);
  const tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> do_layout =
      setTensorLayoutStrideNV(rows_layout, tensor_row_stride(VKF_TENSOR_DO), 1);
  QUERIES_X_DIM(float16_t, gl_MatrixUseA) q_frag, do_frag;
  coopMatLoadTensorNV(q_frag, q_h, q_base, sliceTensorLayoutNV(q_layout, q_begin + own_row, SUBGROUP_ROWS, 0, HEAD_DIM));
  coopMatLoadTensorNV(do_frag, do_h, do_base, sliceTensorLayoutNV(do_layout, q_begin + own_row, SUBGROUP_ROWS, 0, HEAD_DIM));
  QUERIES_X_DIM(float, gl_MatrixUseAccumulator) dq_acc = QUERIES_X_DIM(float, gl_MatrixUseAccumulator)(0.0);

  // LSE and delta of the owned rows (the first step's barriers make them visible).
  for (uint i = gl_LocalInvocationIndex; i < BLOCK_Q; i += WORKGROUP_SIZE) {
    const uint row_index = lse_index(batch, head, seq, q_begin + i);
    lse_rows[i] = row_lse_log2(row_index, q_begin + i, q_len);
    delta_rows[i] = row_delta(row_index, q_begin + i, q_len);
  }
  for (uint i = gl_LocalInvocationIndex; i < BLOCK_KV; i += WORKGROUP_SIZE) key_nonfinite_step[i] = 0;

  // Only the tiles of [kv_first, kv_end) hold keys that the rows see: the others are never visited.
  // Those the mask cuts come last (the band's right edge, kv_len) and, with WINDOW_LEFT, first (its
  // left edge): masked loops around the unmasked one.
  const uint q_rows = q_end - q_begin;
  const uint kv_end = visible_kv_end(q_begin, q_end, q_len, kv_len);
  uint kv_begin = first_visible_kv_tile(q_begin, BLOCK_KV, q_len, kv_len), step = 1;
  MaskWalk closed_keys = mask_walk();  // the tiles the mask closes, read as the loops go
  if (WINDOW_LEFT) {
    [[dont_unroll]] for (; kv_begin < kv_end && tile_needs_mask(q_begin, q_rows, kv_begin, BLOCK_KV, q_len, kv_len);
                         kv_begin += BLOCK_KV, ++step) {
      dq_step(true, kv_begin, step, q_begin, q_rows, own_row, modifiers, mask_summary, closed_keys, q_len, kv_len,
              k_base, v_base, q_frag, do_frag, dq_acc);
    }
  }
  [[dont_unroll]] for (; kv_begin < kv_end && !tile_needs_mask(q_begin, q_rows, kv_begin, BLOCK_KV, q_len, kv_len);
                       kv_begin += BLOCK_KV, ++step) {
    dq_step(false, kv_begin, step, q_begin, q_rows, own_row, modifiers, mask_summary, closed_keys, q_len, kv_len,
            k_base, v_base, q_frag, do_frag, dq_acc);
  }
  [[dont_unroll]] for (; kv_begin < kv_end; kv_begin += BLOCK_KV, ++step) {
    dq_step(true, kv_begin, step, q_begin, q_rows, own_row, modifiers, mask_summary, closed_keys, q_len, kv_len,
            k_base, v_base, q_frag, do_frag, dq_acc);
  }

  dq_acc *= pc.scale_log2 / LOG2E;
  if (DQ_THROUGH_TILES) {
    barrier();  // every matrix load of the last step is done before dQ overwrites the tiles
    coopMatStore(QUERIES_X_DIM(float16_t, gl_MatrixUseAccumulator)(dq_acc), kv_tiles, own_row * TILE_STRIDE, TILE_STRIDE,
                 gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    const uint q_stride = tensor_row_stride(VKF_TENSOR_Q);
    store_dq_rows((q_base + q_begin * q_stride) / 8, q_stride / 8, q_rows);
  } else {
    coopMatStoreTensorNV(QUERIES_X_DIM(float16_t, gl_MatrixUseAccumulator)(dq_acc), dq_h, q_base,
                         sliceTensorLayoutNV(q_layout, q_begin + own_row, SUBGROUP_ROWS, 0, HEAD_DIM));
  }
}
