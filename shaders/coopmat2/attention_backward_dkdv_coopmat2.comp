// FlashAttention-2 backward, dK and dV, on tensor cores with GL_NV_cooperative_matrix2's
// per-element operations and conversions, float16 tensors. One workgroup per (tile of BLOCK_KV
// keys, kv head, batch); subgroup g owns keys [R g, R g + R) of the tile (R = SUBGROUP_ROWS, 16 or
// 32) and keeps their dK and dV as accumulators, and the Q and dO tiles of BLOCK_Q rows whose band
// reaches some of its keys stream through for every query head of the GQA group:
//   S^T = K Q^T      P^T = exp2(scale S^T - LSE)   dV += P^T dO
//   dP^T = V dO^T    dS^T = P^T (dP^T - delta)     dK += dS^T Q   (times scale at the end)
// Deterministic: every key row is summed by one subgroup in a fixed order, no atomics.
// Built with VKF_ATOMIC_DQ = 1 (calls with deterministic = false, devices with float32 buffer
// atomics), it also sums dQ: each step's dS^T goes to shared memory, each subgroup multiplies the
// step's dS by its columns of the tile's K (read from the buffer) and adds that part of dQ to a
// float32 workspace with atomicAdd (scalar/attention_backward_dq_from_sums.comp scales and stores
// it), so that the dQ kernel and its recomputation of P and dP do not run: FlashAttention-2's own
// backward. The atomics bound it: the engine runs it only where the dQ kernel would leave the
// device idle (AtomicDqPays in engine/attention/backends/coopmat2_backend.h).
// Built with VKF_STORE_DS = 1 (deterministic = false elsewhere, where the workspace holds it), it
// stores each step's dS^T in float16 to the workspace instead, and
// attention_backward_dq_from_ds_coopmat2.comp multiplies it by K: five products, no atomics, at
// the price of an N x N buffer per head (dispatched in chunks of (batch, KV head) pairs).
// The matrices have subgroup scope (of flexible size), so that each subgroup's P^T and dS^T are
// already laid out as the A operands of its own dV and dK products. With workgroup-scope matrices
// the driver split the 32 x 64 S^T tile of the earlier kernel over its four subgroups two by two
// (its disassembly, tools/lab/dump_sass.py), and every step handed P^T and dS^T between subgroups
// through shared memory behind eight barriers, which was slower (docs/tuning-log.md).
// Shared memory: the tile's V rows for the whole loop (reloaded as operands every step: holding
// them too leaves no registers at D=128), then a region that first holds its K rows (loaded once
// into each subgroup's A operand) and then each step's Q and dO rows, staged by the whole
// workgroup, with the step's LSE (base 2) and delta, and the query tiles a mask closes
// (common/closed_tiles.glsl). Each step's buffer reads are issued before
// the barrier that waits for the previous step's matrix loads, the shared-memory stores after it
// (attention_forward_coopmat2.comp says why).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#ifndef VKF_ATOMIC_DQ
#define VKF_ATOMIC_DQ 0
#endif
#ifndef VKF_STORE_DS
#define VKF_STORE_DS 0
#endif
#if VKF_ATOMIC_DQ
#extension GL_EXT_shader_atomic_float : require
#endif

#define VKF_DEFAULT_HEAD_DIM 128
#define VKF_DEFAULT_BLOCK_Q 32   // query rows per streamed tile
#define VKF_DEFAULT_BLOCK_KV 64   // key rows owned: SUBGROUP_ROWS per subgroup
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_SUBGROUP_SIZE) const uint SUBGROUP_SIZE = 32;

#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_BWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_BWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_BWD_BINDING_MASK_TILES
#define VKF_SCORE_MOD_BIAS_TILES
#include "common/score_mod.glsl"

layout(std430, set = 0, binding = VKF_BWD_BINDING_Q) readonly buffer q_block { uvec4 q_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_V) readonly buffer v_block { uvec4 v_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DO) readonly buffer do_block { uvec4 do_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DK) writeonly buffer dk_block { uvec4 dk_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DV) writeonly buffer dv_block { uvec4 dv_u4[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };

#if VKF_ATOMIC_DQ
layout(std430, set = 0, binding = VKF_BWD_BINDING_K) readonly buffer k_half_block { float16_t k_h[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ_STATE) buffer dq_sums_block { float dq_sums[]; };
#endif
#if VKF_STORE_DS
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ_STATE) writeonly buffer ds_block { uvec4 ds_u4[]; };
#endif

#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"  // strides are multiples of 8 elements here (the engine checks)
#include "coopmat2/coopmat2_backward.glsl"
#include "coopmat2/stored_ds.glsl"

const uint SUBGROUP_ROWS = BLOCK_KV / (WORKGROUP_SIZE / SUBGROUP_SIZE);  // rows each subgroup owns (16 or 32)
const uint ROW_U4 = VKF_ROW_U4(HEAD_DIM);          // a row of float16 as uvec4 words
const uint TILE_STRIDE = VKF_TILE_STRIDE(ROW_U4);  // padded shared row (see stage_rows.glsl)
// Rows [0, BLOCK_KV): V. From STREAM_ROW0: K once, then each step's Q rows and dO rows.
const uint STREAM_ROW0 = BLOCK_KV;
const uint STREAM_ROWS = VKF_SMEM_DKDV_STREAM_ROWS(BLOCK_Q, BLOCK_KV);
shared uvec4 tiles[VKF_SMEM_DKDV_TILES_U4(BLOCK_KV, STREAM_ROWS, TILE_STRIDE)];
shared float lse_tile[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];    // row_lse_log2 of the step's queries
shared float delta_tile[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];  // row_delta
shared uint nonfinite_do;  // 1 once a tile that the band's edge crosses had an inf or NaN in dO
// Step (from 1) at which the staging last zeroed an inf or NaN in this row of the query tile: in
// tiles that the band's edge crosses, Q is zeroed for dK += dS^T Q (common/nonfinite.glsl).
shared uint query_nonfinite_step[VKF_SMEM_NONFINITE_STEPS(BLOCK_Q)];
#if VKF_ATOMIC_DQ || VKF_STORE_DS
const uint DS_STRIDE = VKF_TILE_STRIDE(BLOCK_Q / 8);   // uvec4 words per key row of ds_tile
shared uvec4 ds_tile[VKF_SMEM_CM2_DS_TILE_U4(BLOCK_KV, BLOCK_Q)];  // the step's dS^T, float16
#endif
#if VKF_ATOMIC_DQ
const uint SUBGROUPS = WORKGROUP_SIZE / SUBGROUP_SIZE;
const uint DQ_COLUMNS = HEAD_DIM / SUBGROUPS;          // the columns of dQ each subgroup sums
// 1 for each key of the tile whose K holds an inf or NaN; nonfinite_k once any does.
shared uint key_nonfinite[VKF_SMEM_NONFINITE_STEPS(BLOCK_KV)];
shared uint nonfinite_k;
#endif
const uint Q_TILE = STREAM_ROW0 * TILE_STRIDE;               // where the Q rows start
const uint DO_TILE = (STREAM_ROW0 + BLOCK_Q) * TILE_STRIDE;  // where the dO rows start
#include "common/nonfinite.glsl"
#include "common/stage_rows.glsl"
const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_vk, store_vk, tiles, v_u4, k_u4, BLOCK_KV, KV_WORDS)
// dK and dV leave through the tiles' first BLOCK_KV rows, one after the other: a matrix store there
// and 16-byte copies out. With tensor-layout stores of dK, dV and dQ the backward ran 6% slower at
// D = 128 on an H200 (docs/tuning-log.md, "outputs through shared memory").
VKF_DEFINE_UNSTAGE_ROWS(store_dk_rows, tiles, dk_u4, BLOCK_KV)
VKF_DEFINE_UNSTAGE_ROWS(store_dv_rows, tiles, dv_u4, BLOCK_KV)
const uint Q_DO_WORDS = VKF_STAGE_WORDS(BLOCK_Q);  // uvec4 words per tensor each invocation copies
const uint STAT_WORDS = (BLOCK_Q + WORKGROUP_SIZE - 1) / WORKGROUP_SIZE;  // LSE / delta values each copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT_AT(load_q_do, store_q_do, tiles, STREAM_ROW0, q_u4, do_u4, BLOCK_Q, Q_DO_WORDS)

#define KEYS_X_DIM(T, USE) coopmat<T, gl_ScopeSubgroup, SUBGROUP_ROWS, HEAD_DIM, USE>
#define KEYS_X_QUERIES(T, USE) coopmat<T, gl_ScopeSubgroup, SUBGROUP_ROWS, BLOCK_Q, USE>
#define QUERIES_X_DIM_B coopmat<float16_t, gl_ScopeSubgroup, BLOCK_Q, HEAD_DIM, gl_MatrixUseB>
#define DIM_X_QUERIES_B coopmat<float16_t, gl_ScopeSubgroup, HEAD_DIM, BLOCK_Q, gl_MatrixUseB>
#include "coopmat2/bias_tiles.glsl"
VKF_DEFINE_BIAS_TILE_TRANSPOSED(bias_tile_t, gl_ScopeSubgroup, SUBGROUP_ROWS, BLOCK_Q)
#include "common/closed_tiles.glsl"

// Callbacks: row is a key of the subgroup's rows (the first at k0), col a query of the step's tile
// (the first at q0); q_len and kv_len are the sequence's.
float p_of_st(const uint row, const uint col, const float st, const uint q0, const uint k0, const uint q_len,
              const uint kv_len, const ScoreHead modifiers) {
  return p_of_score(st, lse_tile[col], modifiers, q0 + col, k0 + row, q_len, kv_len);
}
float masked_p_of_st(const uint row, const uint col, const float st, const uint q0, const uint k0, const uint q_len,
                     const uint kv_len, const ScoreHead modifiers) {
  return masked_p(q0 + col, k0 + row, st, lse_tile[col], modifiers, q_len, kv_len);
}
// dS^T = P^T (dP^T - delta)
float ds_of_dpt(const uint row, const uint col, const float dpt, const float p, const uint q0, const uint k0,
                const uint q_len, const uint kv_len, const ScoreHead modifiers) {
  return ds_of(p, dpt, delta_tile[col], lse_tile[col], modifiers, q0 + col, k0 + row, q_len, kv_len);
}
// In a tile that crosses the mask, also NaN where a query whose Q the staging zeroed at this step
// sees the key (common/nonfinite.glsl).
float masked_ds_of_dpt(const uint row, const uint col, const float dpt, const float p, const uint q0, const uint k0,
                       const uint step, const uint q_len, const uint kv_len, const ScoreHead modifiers) {
  const float ds = masked_ds(q0 + col, k0 + row, p, dpt, delta_tile[col], lse_tile[col], modifiers, q_len, kv_len);
  return query_nonfinite_step[col] == step && key_visible(q0 + col, k0 + row, q_len, kv_len) ? VKF_NAN : ds;
}
// dV plus the infinities and NaNs of dO (column `col`, read from the buffer) of the queries of
// every head of the group that see the key in the tiles whose Q and dO the staging zeroed (those
// the band's edge crosses, the same in every head: CrossedRuns(first_end, second_begin);
// common/nonfinite.glsl). dO row q of the group's first head starts at element do_base.
float add_seen_nonfinite_do(const uint row, const uint col, const float dv, const uint k0, const uint first_end,
                            const uint second_begin, const uint do_base, const uint q_len, const uint kv_len) {
  float sum = dv;
  const uint head_stride = pc.strides[3 * VKF_TENSOR_DO + 1], do_stride = tensor_row_stride(VKF_TENSOR_DO);
  const uvec4 rows = crossed_part(CrossedRuns(first_end, second_begin), key_rows_begin(k0 + row, q_len, kv_len),
                                  key_rows_end(k0 + row, q_len, kv_len));
  for (uint h = 0; h < pc.q_heads / pc.kv_heads; ++h) {
    [[unroll]] for (uint run = 0; run < 2; ++run) {
      for (uint q = rows[2 * run]; q < rows[2 * run + 1]; ++q) {
        const float x = VKF_BUFFER_HALF(do_u4, do_base + h * head_stride + q * do_stride + col);
        if (isinf(x) || isnan(x)) sum += x;
      }
    }
  }
  return sum;
}

#if VKF_ATOMIC_DQ
// For dQ: a K element, zeroed where non-finite, and dS, NaN where the query sees a key whose K
// holds an inf or NaN (common/nonfinite.glsl: the product runs on zeroed operands). Only in
// workgroups whose key tile has such a key.
float16_t zero_nonfinite_k(const uint row, const uint col, const float16_t k) {
  return isinf(k) || isnan(k) ? float16_t(0.0) : k;
}
float ds_for_dq(const uint row, const uint col, const float ds, const uint own_row, const uint q0, const uint k0,
                const uint q_len, const uint kv_len) {
  return key_nonfinite[own_row + row] != 0 && key_visible(q0 + col, k0 + row, q_len, kv_len) ? VKF_NAN : ds;
}

// dQ += dS K for the step's queries, into dq_sums (rows of the head from dq_row0 on). Subgroup g
// takes columns [g DQ_COLUMNS, (g + 1) DQ_COLUMNS) of every query row: dS (all BLOCK_KV keys) from
// ds_tile, its columns of K from the buffer (L1 or L2: the workgroup reads the same rows every
// step), the sum through its part of the stream region (free once every subgroup has multiplied
// by the step's Q and dO), then one float atomic per element.
void add_dq(const uint q_begin, const uint q_len, const uint kv_begin, const uint kv_len, const uint k_base,
            const uint dq_row0) {
  barrier();  // ds_tile holds every subgroup's dS^T, and no subgroup reads the step's Q or dO any more
  coopmat<float16_t, gl_ScopeSubgroup, BLOCK_Q, BLOCK_KV, gl_MatrixUseA> ds;
  coopMatLoad(ds, ds_tile, 0, DS_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
  const uint column0 = gl_SubgroupID * DQ_COLUMNS;
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> k_layout =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  k_layout = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(k_layout, kv_len, HEAD_DIM),
                                     tensor_row_stride(VKF_TENSOR_K), 1);
  coopmat<float16_t, gl_ScopeSubgroup, BLOCK_KV, DQ_COLUMNS, gl_MatrixUseB> k_columns;
  coopMatLoadTensorNV(k_columns, k_h, k_base, sliceTensorLayoutNV(k_layout, kv_begin, BLOCK_KV, column0, DQ_COLUMNS));
  if (nonfinite_k != 0) coopMatPerElementNV(k_columns, k_columns, zero_nonfinite_k);
  const coopmat<float, gl_ScopeSubgroup, BLOCK_Q, DQ_COLUMNS, gl_MatrixUseAccumulator> dq =
      coopMatMulAdd(ds, k_columns, coopmat<float, gl_ScopeSubgroup, BLOCK_Q, DQ_COLUMNS, gl_MatrixUseAccumulator>(0.0));
  const uint staging = Q_TILE + gl_SubgroupID * BLOCK_Q * (DQ_COLUMNS / 4);  // uvec4 words of 4 floats
  coopMatStore(dq, tiles, staging, DQ_COLUMNS / 4, gl_CooperativeMatrixLayoutRowMajor);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  // Consecutive lanes add consecutive floats, so that an atomic instruction touches few cache lines
  // (lanes that each added a 16-byte word were slower: docs/tuning-log.md).
  for (uint i = gl_SubgroupInvocationID; i < BLOCK_Q * DQ_COLUMNS; i += SUBGROUP_SIZE) {
    const uint row = i / DQ_COLUMNS;
    if (q_begin + row >= q_len) break;  // rows past the sequence: i only grows
    atomicAdd(dq_sums[(dq_row0 + q_begin + row) * HEAD_DIM + column0 + i % DQ_COLUMNS],
              uintBitsToFloat(tiles[staging + i / 4][i % 4]));
  }
}
#endif

// One step of a head's query loop: stage the query tile at q_begin with its LSE and delta, recompute
// P^T, dV += P^T dO, dS^T = P^T (dP^T - delta), dK += dS^T Q. `masked` steps (query tiles that
// the band's edges cut, the first of the loop and with WINDOW_LEFT the last, or every tile where
// the key tile crosses kv_len) also mask P^T and dS^T; main() runs them in loops of their own (as
// attention_backward_dq_coopmat2.comp does, which says why). In `crossing` steps (the band's edge
// crosses the tile) the staging also zeroes Q's and dO's infinities and NaNs.
// q_base, do_base: elements where the head's query 0 starts in Q and dO; lse_row0: its LSE index.
// k_base (VKF_ATOMIC_DQ only): where K's key 0 starts. dq_at: with VKF_ATOMIC_DQ the head's query 0
// in dq_sums, with VKF_STORE_DS where the head's slot of dS^T starts in the workspace.
void dkdv_step(const bool masked, const bool crossing, const uint step, const uint q_begin, const uint q_len,
               const uint kv_len, const uint q_base, const uint do_base, const uint lse_row0, const uint k_base,
               const uint dq_at, const uint kv_begin, const uint own_row, const ScoreHead modifiers,
               const uint mask_summary, const KEYS_X_DIM(float16_t, gl_MatrixUseA) k_frag,
               inout KEYS_X_DIM(float, gl_MatrixUseAccumulator) dk_acc,
               inout KEYS_X_DIM(float, gl_MatrixUseAccumulator) dv_acc) {
  if (tile_closed(mask_summary, false, q_begin, BLOCK_Q, q_len, kv_begin, min(kv_begin + BLOCK_KV, kv_len))) {
    return;  // the mask closes the tile (the same in the whole workgroup)
  }
  // This step's rows, LSE and delta, read from the buffers while waiting for every matrix
  // load of the previous step (the first step: for the K loads); then stored.
  const uint q_valid = min(BLOCK_Q, q_len - q_begin);
  const uint q_stride = tensor_row_stride(VKF_TENSOR_Q), do_stride = tensor_row_stride(VKF_TENSOR_DO);
  uvec4 q_words[Q_DO_WORDS], do_words[Q_DO_WORDS];
  load_q_do(q_words, do_words, (q_base + q_begin * q_stride) / 8, q_stride / 8, (do_base + q_begin * do_stride) / 8,
            do_stride / 8, q_valid);
  float lse[STAT_WORDS], delta[STAT_WORDS];
  [[unroll]] for (uint j = 0; j < STAT_WORDS; ++j) {
    const uint r = gl_LocalInvocationIndex + j * WORKGROUP_SIZE;
    lse[j] = row_lse_log2(lse_row0 + q_begin + r, q_begin + r, q_len);
    delta[j] = row_delta(lse_row0 + q_begin + r, q_begin + r, q_len);
  }
  barrier();
  if (masked && crossing) {
    VKF_ZERO_NONFINITE_ROWS(q_words, Q_DO_WORDS, query_nonfinite_step, step);
    bool found = false;
    VKF_ZERO_NONFINITE(do_words, Q_DO_WORDS, found);
    if (found) atomicOr(nonfinite_do, 1u);
  }
  store_q_do(q_words, do_words);
  [[unroll]] for (uint j = 0; j < STAT_WORDS; ++j) {
    const uint r = gl_LocalInvocationIndex + j * WORKGROUP_SIZE;
    if (r < BLOCK_Q) {
      lse_tile[r] = lse[j];
      delta_tile[r] = delta[j];
    }
  }
  barrier();

  // S^T = K Q^T, P^T = exp2(scale S^T - LSE)
  DIM_X_QUERIES_B q_t;
  coopMatLoad(q_t, tiles, Q_TILE, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
  KEYS_X_QUERIES(float, gl_MatrixUseAccumulator) p_t =
      coopMatMulAdd(k_frag, q_t, KEYS_X_QUERIES(float, gl_MatrixUseAccumulator)(0.0));
  if (bias_tiles()) {  // scaled here, the bias added as a matrix (p_of_score knows)
    p_t = p_t * pc.scale_log2 + bias_tile_t(modifiers.mask_base, q_begin, kv_begin + own_row);
  }
  if (masked) {
    coopMatPerElementNV(p_t, p_t, masked_p_of_st, q_begin, kv_begin + own_row, q_len, kv_len, modifiers);
  } else {
    coopMatPerElementNV(p_t, p_t, p_of_st, q_begin, kv_begin + own_row, q_len, kv_len, modifiers);
  }

  // dV += P^T dO
  QUERIES_X_DIM_B do_tile;
  coopMatLoad(do_tile, tiles, DO_TILE, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
  dv_acc = coopMatMulAdd(KEYS_X_QUERIES(float16_t, gl_MatrixUseA)(p_t), do_tile, dv_acc);

  // dP^T = V dO^T, dS^T = P^T (dP^T - delta)
  KEYS_X_DIM(float16_t, gl_MatrixUseA) v_frag;
  coopMatLoad(v_frag, tiles, own_row * TILE_STRIDE, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
  DIM_X_QUERIES_B do_t;
  coopMatLoad(do_t, tiles, DO_TILE, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
  KEYS_X_QUERIES(float, gl_MatrixUseAccumulator) ds_t =
      coopMatMulAdd(v_frag, do_t, KEYS_X_QUERIES(float, gl_MatrixUseAccumulator)(0.0));
  if (masked) {  // 0 for masked pairs whatever dP^T holds (an inf in dO)
    coopMatPerElementNV(ds_t, ds_t, masked_ds_of_dpt, p_t, q_begin, kv_begin + own_row, step, q_len, kv_len, modifiers);
  } else {
    coopMatPerElementNV(ds_t, ds_t, ds_of_dpt, p_t, q_begin, kv_begin + own_row, q_len, kv_len, modifiers);
  }

  // dK += dS^T Q
  QUERIES_X_DIM_B q_tile;
  coopMatLoad(q_tile, tiles, Q_TILE, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
  dk_acc = coopMatMulAdd(KEYS_X_QUERIES(float16_t, gl_MatrixUseA)(ds_t), q_tile, dk_acc);

#if VKF_ATOMIC_DQ
  if (nonfinite_k != 0) {
    coopMatPerElementNV(ds_t, ds_t, ds_for_dq, own_row, q_begin, kv_begin + own_row, q_len, kv_len);
  }
  coopMatStore(KEYS_X_QUERIES(float16_t, gl_MatrixUseAccumulator)(ds_t), ds_tile, own_row * DS_STRIDE, DS_STRIDE,
               gl_CooperativeMatrixLayoutRowMajor);
  add_dq(q_begin, q_len, kv_begin, kv_len, k_base, dq_at);
#endif
#if VKF_STORE_DS
  // Masked pairs hold 0, pairs whose Q the staging zeroed NaN (masked_ds_of_dpt): what the dQ
  // kernel's own dS would hold. Through the subgroup's rows of ds_tile, so that each lane writes
  // whole 16-byte words: the matrix stored straight to the buffer (a lane's few halves per row)
  // took 3 of the kernel's 7 ms at D = 128, N = 4096 (docs/tuning-log.md, "stored dS in the
  // coopmat2 backward").
  coopMatStore(KEYS_X_QUERIES(float16_t, gl_MatrixUseAccumulator)(ds_t), ds_tile, own_row * DS_STRIDE, DS_STRIDE,
               gl_CooperativeMatrixLayoutRowMajor);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  const uint row_words = BLOCK_Q / 8, ds_stride = stored_ds_stride() / 8;
  const uint ds_row0 = (dq_at + q_begin) / 8 + (kv_begin + own_row) * ds_stride;
  for (uint i = gl_SubgroupInvocationID; i < SUBGROUP_ROWS * row_words; i += SUBGROUP_SIZE) {
    const uint r = i / row_words, c = i % row_words;
    ds_u4[ds_row0 + r * ds_stride + c] = ds_tile[(own_row + r) * DS_STRIDE + c];
  }
  // The next write of these rows of ds_tile comes after the next step's barriers.
#endif
}

void main() {
#if VKF_STORE_DS
  // Dispatched over a chunk of (batch, KV head) pairs, from pair pc.chunk_begin on: the workspace
  // holds the chunk's slots of dS^T.
  const uint pair = pc.chunk_begin + gl_WorkGroupID.y;
  const uint kv_head = pair % pc.kv_heads, batch = pair / pc.kv_heads;
#else
  const uint kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
#endif
  const uint kv_begin = gl_WorkGroupID.x * BLOCK_KV;
  const uint own_row = SUBGROUP_ROWS * gl_SubgroupID;  // this subgroup's first key inside the tile
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  if (kv_begin >= seq.kv_rows) return;  // past the key rows of this batch entry
  // Rows from q_loop_end on see none of the tile's keys. A tile of keys the sequence does not attend
  // to gets zero dK and dV: no query tile is visited.
  const uint q_loop_end = kv_begin < kv_len ? visible_q_end(kv_begin, BLOCK_KV, q_len, kv_len) : 0;
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);

  if (gl_LocalInvocationIndex == 0) nonfinite_do = 0;  // before the first barrier
  for (uint i = gl_LocalInvocationIndex; i < BLOCK_Q; i += WORKGROUP_SIZE) query_nonfinite_step[i] = 0;
#if VKF_ATOMIC_DQ
  if (gl_LocalInvocationIndex == 0) nonfinite_k = 0;
  for (uint i = gl_LocalInvocationIndex; i < BLOCK_KV; i += WORKGROUP_SIZE) key_nonfinite[i] = 0;
  barrier();  // the flags are zero before the staging raises any
#endif
  // The tile's V rows (kept) and K rows (loaded once as this subgroup's A operand).
  uvec4 v_words[KV_WORDS], k_words[KV_WORDS];
  load_vk(v_words, k_words, (v_base + kv_begin * v_stride) / 8, v_stride / 8, (k_base + kv_begin * k_stride) / 8,
          k_stride / 8, kv_begin < kv_len ? min(BLOCK_KV, kv_len - kv_begin) : 0);
#if VKF_ATOMIC_DQ
  VKF_FLAG_NONFINITE_ROWS(k_words, KV_WORDS, key_nonfinite, nonfinite_k);
#endif
  store_vk(v_words, k_words);
  barrier();
  KEYS_X_DIM(float16_t, gl_MatrixUseA) k_frag;
  coopMatLoad(k_frag, tiles, (STREAM_ROW0 + own_row) * TILE_STRIDE, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);

  KEYS_X_DIM(float, gl_MatrixUseAccumulator) dk_acc = KEYS_X_DIM(float, gl_MatrixUseAccumulator)(0.0);
  KEYS_X_DIM(float, gl_MatrixUseAccumulator) dv_acc = KEYS_X_DIM(float, gl_MatrixUseAccumulator)(0.0);

  // Only the query tiles of [q_first, q_loop_end) hold rows that see some of this tile's keys (the
  // band): the others are never visited. Those the mask cuts come first (the band's right edge, or
  // all of them where the key tile crosses kv_len) and, with WINDOW_LEFT, last (its left edge), from
  // the tile of the first row that misses key kv_begin on; the tiles between them run unmasked.
  const uint q_first = visible_q_begin(kv_begin, q_len, kv_len) / BLOCK_Q * BLOCK_Q;
  uint unmasked_q_end = q_loop_end;
  if (WINDOW_LEFT) {
    const uint rows_end = key_rows_end(kv_begin, q_len, kv_len);
    if (rows_end < q_len) unmasked_q_end = min(unmasked_q_end, rows_end / BLOCK_Q * BLOCK_Q);
  }
  const uint group = pc.q_heads / pc.kv_heads;
  CrossedRuns crossed = no_crossed_tiles(q_first, q_len);  // the same query tiles in every head
  uint step = 0;
  for (uint head = kv_head * group; head < (kv_head + 1) * group; ++head) {
#if VKF_STORE_DS
    const uint dq_at = stored_ds_slot(gl_WorkGroupID.y * group + head - kv_head * group);
#else
    const uint dq_at = dq_sum_row(batch, head, 0);
#endif
    const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0);
    const uint do_base = tensor_base(VKF_TENSOR_DO, batch, head, seq.q_row0);
    const uint lse_row0 = lse_index(batch, head, seq, 0);
    const ScoreHead modifiers = score_head(batch, head);
    const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes
    if (MASK != VKF_MASK_NONE) {
      find_closed_tiles(mask_summary, false, q_first, q_loop_end, BLOCK_Q, q_len, kv_begin, min(kv_begin + BLOCK_KV, kv_len));
    }
    uint q_begin = q_first;
    [[dont_unroll]] for (; q_begin < q_loop_end &&
                           tile_needs_mask(q_begin, min(BLOCK_Q, q_len - q_begin), kv_begin, BLOCK_KV, q_len, kv_len);
                         q_begin += BLOCK_Q) {
      const bool crossing = tile_crosses_band(q_begin, min(BLOCK_Q, q_len - q_begin), kv_begin, BLOCK_KV, q_len, kv_len);
      if (crossing) note_crossed_tile(crossed, q_begin, min(q_begin + BLOCK_Q, q_len));
      dkdv_step(true, crossing, ++step, q_begin, q_len, kv_len, q_base, do_base, lse_row0, k_base, dq_at, kv_begin,
                own_row, modifiers, mask_summary, k_frag, dk_acc, dv_acc);
    }
    // With atomic dQ, workgroups of neighbouring key tiles start at different query tiles, so that
    // their atomics do not all add to the same dQ rows at a time.
    const uint unmasked_tiles = q_begin < unmasked_q_end ? (unmasked_q_end - q_begin + BLOCK_Q - 1) / BLOCK_Q : 0;
    const uint first_tile = VKF_ATOMIC_DQ != 0 && unmasked_tiles > 0 ? gl_WorkGroupID.x % unmasked_tiles : 0;
    [[dont_unroll]] for (uint t = 0; t < unmasked_tiles; ++t) {
      const uint tile = t + first_tile < unmasked_tiles ? t + first_tile : t + first_tile - unmasked_tiles;
      dkdv_step(false, false, ++step, q_begin + tile * BLOCK_Q, q_len, kv_len, q_base, do_base, lse_row0, k_base,
                dq_at, kv_begin, own_row, modifiers, mask_summary, k_frag, dk_acc, dv_acc);
    }
    if (WINDOW_LEFT) {
      [[dont_unroll]] for (q_begin += unmasked_tiles * BLOCK_Q; q_begin < q_loop_end; q_begin += BLOCK_Q) {
        const bool crossing =
            tile_crosses_band(q_begin, min(BLOCK_Q, q_len - q_begin), kv_begin, BLOCK_KV, q_len, kv_len);
        if (crossing) note_crossed_tile(crossed, q_begin, min(q_begin + BLOCK_Q, q_len));
        dkdv_step(true, crossing, ++step, q_begin, q_len, kv_len, q_base, do_base, lse_row0, k_base, dq_at,
                  kv_begin, own_row, modifiers, mask_summary, k_frag, dk_acc, dv_acc);
      }
    }
  }

  // Infinities and NaNs of dO that the staging zeroed, where the keys see them (rare: the flag was
  // raised before the last step's second barrier).
  if (nonfinite_do != 0) {
    coopMatPerElementNV(dv_acc, dv_acc, add_seen_nonfinite_do, kv_begin + own_row, crossed.first_end, crossed.second_begin,
                        tensor_base(VKF_TENSOR_DO, batch, kv_head * group, seq.q_row0), q_len, kv_len);
  }

  // Rows [kv_len, kv_rows) get zeros (their keys are masked), rows past the sequence's are not written.
  dk_acc *= pc.scale_log2 / LOG2E;
  const uint valid_rows = min(BLOCK_KV, seq.kv_rows - kv_begin);
  barrier();  // every matrix load of the last step is done before dK overwrites the tiles
  coopMatStore(KEYS_X_DIM(float16_t, gl_MatrixUseAccumulator)(dk_acc), tiles, own_row * TILE_STRIDE, TILE_STRIDE,
               gl_CooperativeMatrixLayoutRowMajor);
  barrier();
  store_dk_rows((k_base + kv_begin * k_stride) / 8, k_stride / 8, valid_rows);
  barrier();  // dK's rows read before dV overwrites them
  coopMatStore(KEYS_X_DIM(float16_t, gl_MatrixUseAccumulator)(dv_acc), tiles, own_row * TILE_STRIDE, TILE_STRIDE,
               gl_CooperativeMatrixLayoutRowMajor);
  barrier();
  store_dv_rows((v_base + kv_begin * v_stride) / 8, v_stride / 8, valid_rows);
}
