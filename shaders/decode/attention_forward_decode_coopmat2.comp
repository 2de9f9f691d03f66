// Forward for a few query rows per KV head over many keys on workgroup-scope tensor cores
// (GL_NV_cooperative_matrix2): speculative decoding, or a short prompt over a long cache, where the
// packed rows are too many for decode/attention_forward_decode.comp's registers. As that kernel,
// one workgroup per (key split, KV head, batch) takes every query row of the KV head's group,
// G = q_heads / kv_heads heads x q_len rows packed head-major (the engine keeps G * q_len <=
// BLOCK_Q), so each K and V row is read from memory once per split; and as it, one split writes O
// and the LSE, several write their normalized O and base-2 LSE to the workspace
// (VKF_FWD_BINDING_O_STATE, _ROW_STATE) for decode/attention_decode_combine.comp to merge.
// The step is the prefill kernel's (coopmat2/online_softmax.glsl, K and V staged the same way).
// Differences from coopmat2/attention_forward_coopmat2.comp: the packed Q rows come from several
// heads, so they are staged through shared memory rather than loaded through a tensor layout; the
// same goes for O on its way out, where the rows' inf and NaN of V zeroed by the staging are added
// back before the store.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require

#define VKF_DEFAULT_HEAD_DIM 128
#define VKF_DEFAULT_BLOCK_Q 16
#define VKF_DEFAULT_BLOCK_KV 64
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_WRITE_LSE) const bool WRITE_LSE = true;
layout(constant_id = VKF_SPEC_CHUNKED) const bool SPLIT = false;  // partial results to the workspace
layout(constant_id = VKF_SPEC_CM2_STAT_COLUMNS) const uint STAT_COLUMNS = 32;
// With a mask: the key tiles it closes from its block summary, or (short parts: decode_backend.h)
// from its elements, scanned before the loop for packed rows 0 .. TERM_ROWS - 1 (those of the
// others repeat them, as in decode/attention_forward_decode.comp).
layout(constant_id = VKF_SPEC_MASK_SUMMARY) const bool MASK_SUMMARY = true;
layout(constant_id = VKF_SPEC_MASK_TERM_ROWS) const uint TERM_ROWS = VKF_DEFAULT_BLOCK_Q;

#include "common/constants.glsl"
#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_FWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_FWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_FWD_BINDING_MASK_TILES
#define VKF_SCORE_MOD_BINDING_SINKS VKF_FWD_BINDING_SINKS
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_FWD_BINDING_SEQUENCES
#include "common/sequences.glsl"  // strides are multiples of 8 elements here (the engine checks)

layout(std430, set = 0, binding = VKF_FWD_BINDING_Q) readonly buffer q_block { uvec4 q_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_V) readonly buffer v_block { uvec4 v_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_O) writeonly buffer o_block { uvec2 o_h4[]; };  // half quads
layout(std430, set = 0, binding = VKF_FWD_BINDING_LSE) writeonly buffer lse_block { float lse_data[]; };
#include "decode/split_parts.glsl"
VKF_DECLARE_SPLIT_PARTS(writeonly)  // SPLIT: this part of every packed row

const uint ROW_U4 = VKF_ROW_U4(HEAD_DIM);          // a row of float16 as uvec4 words
const uint TILE_STRIDE = VKF_TILE_STRIDE(ROW_U4);  // padded shared row (see stage_rows.glsl)
const uint QUADS = HEAD_DIM / 4;
// K rows [0, BLOCK_KV), then V rows; before the loop, the packed Q rows (float16 at TILE_STRIDE);
// after it, the normalized O (float32, QUADS words a row). Both fit: the engine keeps BLOCK_Q <=
// BLOCK_KV.
shared uvec4 kv_tiles[VKF_SMEM_ROW_PAIR_U4(BLOCK_KV, TILE_STRIDE)];
shared float row_lse[VKF_SMEM_ROW_FLOATS(BLOCK_Q)];  // base 2
shared uint nonfinite_v;  // 1 once a tile that the band's edge crosses had an inf or NaN in V
shared uint open_tiles;   // without MASK_SUMMARY: bit i set where the mask leaves the part's key tile i a pair
                          // (VKF_SMEM_OPEN_TILE_BITS_UINTS)
#include "common/nonfinite.glsl"
#include "common/stage_rows.glsl"
const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_kv, store_kv, kv_tiles, k_u4, v_u4, BLOCK_KV, KV_WORDS)

#include "coopmat2/online_softmax.glsl"

// Packed row `row` is query row row % q_len (of head row / q_len of the group): it sees the keys of
// its band below key_end. Rows past the group's are never stored.
float mask_packed(const uint row, const uint col, const float s, const uint kv_begin, const uint key_end,
                  const uint q_len, const uint kv_len) {
  const uint key = kv_begin + col;
  return key < key_end && key_visible(row % q_len, key, q_len, kv_len) ? s : NEG_INF;
}

// The query head of packed row `row` (rows past the last packed row: the last one's).
uint packed_head(const uint row, const uint rows, const uint q_len) {
  return gl_WorkGroupID.y * (pc.q_heads / pc.kv_heads) + min(row, rows - 1) / q_len;
}
// The softcap, ALiBi and mask of a packed row's scores (score_head per element: rows of one tile belong to different heads).
float modify_packed(const uint row, const uint col, const float s, const uint kv_begin, const uint rows,
                    const uint q_len, const uint kv_len) {
  return score_mod(s, score_head(gl_WorkGroupID.z, packed_head(row, rows, q_len)), row % q_len, kv_begin + col,
                   q_len, kv_len);
}
// A packed row's sink (base 2), joined at the row's end.
float packed_sink(const uint row, const uint col, const float x, const uint rows, const uint q_len) {
  return sink_log2(packed_head(row, rows, q_len));
}

float keep_lse(const uint row, const uint col, const float lse) {
  if (col == 0) row_lse[row] = lse;
  return lse;
}

void main() {
  const uint split = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint group_size = pc.q_heads / pc.kv_heads;
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint rows = group_size * q_len;  // packed rows: head-major, then query row
  if (rows == 0) return;                 // a batch entry without queries
  const uint tid = gl_LocalInvocationIndex;

  // This split's keys, from the key tile where the band of rows 0 .. q_len - 1 starts (the first
  // row's first key) to where it ends (the last row's last); a split with none (past a shorter
  // sequence's keys, outside the window) writes parts that weigh nothing.
  const uint key_begin = max(split * pc.split_keys, first_visible_kv_tile(0, BLOCK_KV, q_len, kv_len));
  const uint key_end = max(key_begin, min(split * pc.split_keys + pc.split_keys, visible_kv_end(0, q_len, q_len, kv_len)));
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);

  // Without the summary, the part's key tiles the mask leaves some pair (at most
  // VKF_DECODE_SCAN_MAX_TILES: the engine), its elements scanned while Q is staged: one pass of
  // coalesced reads, where the summary would take a pass and a barrier before the kernel.
  const bool scan_mask = MASK != VKF_MASK_NONE && !MASK_SUMMARY;
  if (scan_mask) {
    if (tid == 0) open_tiles = 0;
    barrier();
    // SCAN_BATCH elements an invocation a trip, their loads in flight together: the whole scan in
    // one trip (the engine keeps it to this many elements an invocation, where it costs less than
    // the summary's pass: decode_backend.h). Past the end, the last element again.
    const uint SCAN_BATCH = VKF_DECODE_SCAN_MAX_PER_INVOCATION;
    const uint part_keys = key_end - key_begin, elements = TERM_ROWS * part_keys;
    uint open = 0;
    for (uint first = tid; first < elements; first += SCAN_BATCH * WORKGROUP_SIZE) {
      float terms[SCAN_BATCH];
      uint tiles[SCAN_BATCH];
      [[unroll]] for (uint b = 0; b < SCAN_BATCH; ++b) {
        const uint i = min(first + b * WORKGROUP_SIZE, elements - 1);
        const uint row = i / part_keys, key = i % part_keys;
        tiles[b] = key / BLOCK_KV;
        terms[b] = row < rows ? mask_bias_log2(score_head(batch, packed_head(row, rows, q_len)), row % q_len,
                                               key_begin + key)
                              : NEG_INF;
      }
      [[unroll]] for (uint b = 0; b < SCAN_BATCH; ++b) open |= terms[b] != NEG_INF ? 1u << tiles[b] : 0u;
    }
    if (open != 0) atomicOr(open_tiles, open);
  }
  // Q: packed row r is row r % q_len of head kv_head * group_size + r / q_len; rows past the
  // group's are zeros.
  for (uint i = tid; i < BLOCK_Q * ROW_U4; i += WORKGROUP_SIZE) {
    const uint r = i / ROW_U4, word = i % ROW_U4;
    uvec4 w = uvec4(0);
    if (r < rows) {
      const uint head = kv_head * group_size + r / q_len;
      w = q_u4[(tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0) + (r % q_len) * tensor_row_stride(VKF_TENSOR_Q)) / 8 + word];
    }
    kv_tiles[r * TILE_STRIDE + word] = w;
  }
  if (tid == 0) nonfinite_v = 0;
  barrier();
  coopmat<float16_t, gl_ScopeWorkgroup, BLOCK_Q, HEAD_DIM, gl_MatrixUseA> q_tile;
  coopMatLoad(q_tile, kv_tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);

  ROWS_X_DIM(float) o_acc = ROWS_X_DIM(float)(0.0);
  ROW_VECTOR(float) m_run = ROW_VECTOR(float)(NEG_HALF_FLT_MAX);
  ROW_VECTOR(float) l_run = ROW_VECTOR(float)(0.0);
  ROW_VECTOR(float) depth_run = ROW_VECTOR(float)(0.0);  // P, l and O are measured from m_run - depth_run
  const ONES_COLUMNS ones = ONES_COLUMNS(1.0);
  CrossedRuns crossed = no_crossed_tiles(key_begin, key_end);  // where V was zeroed
  MaskWalk closed_keys = mask_walk();  // the tiles the mask closes for every packed head, read as the loop goes
  const uint open_tile_bits = scan_mask ? open_tiles : 0u;  // after Q's barrier
  [[dont_unroll]] for (uint kv_begin = key_begin; kv_begin < key_end; kv_begin += BLOCK_KV) {
    const bool closed = scan_mask ? (open_tile_bits & (1u << ((kv_begin - key_begin) / BLOCK_KV))) == 0
                                  : mask_closes_heads_keys(closed_keys, batch, kv_head * group_size, group_size, 0,
                                                           q_len, kv_begin, min(kv_begin + BLOCK_KV, key_end));
    if (closed) {
      // Skipped, its place in the crossed runs kept: the fix-ups read the runs as without a mask.
      if (tile_crosses_band(0, q_len, kv_begin, BLOCK_KV, q_len, kv_len)) {
        note_crossed_tile(crossed, kv_begin, kv_begin + BLOCK_KV);
      }
      continue;
    }
    // Staged as in the prefill kernel; the first barrier also waits for Q's load from the tiles.
    // Tiles start at multiples of BLOCK_KV (so does split_keys); a split's last may end past its keys.
    const bool masked_tile = kv_begin + BLOCK_KV > key_end || tile_needs_mask(0, q_len, kv_begin, BLOCK_KV, q_len, kv_len);
    uvec4 k_words[KV_WORDS], v_words[KV_WORDS];
    load_kv(k_words, v_words, (k_base + kv_begin * k_stride) / 8, k_stride / 8, (v_base + kv_begin * v_stride) / 8,
            v_stride / 8, min(BLOCK_KV, key_end - kv_begin));
    barrier();
    if (tile_crosses_band(0, q_len, kv_begin, BLOCK_KV, q_len, kv_len)) {
      note_crossed_tile(crossed, kv_begin, kv_begin + BLOCK_KV);
      bool found = false;
      VKF_ZERO_NONFINITE(v_words, KV_WORDS, found);
      if (found) atomicOr(nonfinite_v, 1u);
    }
    store_kv(k_words, v_words);
    barrier();

    coopmat<float16_t, gl_ScopeWorkgroup, HEAD_DIM, BLOCK_KV, gl_MatrixUseB> k_t;
    coopMatLoad(k_t, kv_tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
    ROWS_X_KEYS(float) s = coopMatMulAdd(q_tile, k_t, ROWS_X_KEYS(float)(0.0));
    s *= pc.scale_log2;
    if (scores_modified()) coopMatPerElementNV(s, s, modify_packed, kv_begin, rows, q_len, kv_len);
    if (masked_tile) coopMatPerElementNV(s, s, mask_packed, kv_begin, key_end, q_len, kv_len);
    online_softmax_step(s, ones, o_acc, m_run, depth_run, l_run);
  }

  // O (normalized, float32) and the rows' base-2 LSE through shared memory, to be stored row by row.
  ROW_VECTOR(float) sinks = ROW_VECTOR(float)(NEG_INF), o_scale, lse;
  if (SINKS && split == 0) coopMatPerElementNV(sinks, sinks, packed_sink, rows, q_len);  // they join one part only
  finish_rows(m_run, depth_run, l_run, sinks, o_scale, lse);
  const ROWS_X_DIM(float) o_out = scaled_o(o_acc, o_scale);
  barrier();  // every matrix load of the last step is done
  coopMatStore(o_out, kv_tiles, 0, QUADS, gl_CooperativeMatrixLayoutRowMajor);
  coopMatPerElementNV(lse, lse, keep_lse);
  barrier();

  const uint parts = SPLIT ? split_part_count() : 1;
  for (uint i = tid; i < rows * QUADS; i += WORKGROUP_SIZE) {
    const uint r = i / QUADS, quad = i % QUADS;
    const uint head = kv_head * group_size + r / q_len, n = r % q_len;
    vec4 o = uintBitsToFloat(kv_tiles[i]);
    // Infinities and NaNs of V that the staging zeroed, where this row sees them (rare; as the
    // prefill kernel restores them: common/nonfinite.glsl): the row's keys of this split in the
    // crossed tiles.
    if (nonfinite_v != 0) {
      const uvec4 keys = crossed_part(crossed, max(key_begin, row_keys_begin(n, q_len, kv_len)),
                                      min(row_keys_end(n, q_len, kv_len), key_end));
      [[unroll]] for (uint run = 0; run < 2; ++run) {
        for (uint key = keys[2 * run]; key < keys[2 * run + 1]; ++key) {
          [[unroll]] for (uint c = 0; c < 4; ++c) {
            const float x = VKF_BUFFER_HALF(v_u4, v_base + key * v_stride + 4 * quad + c);
            if (isinf(x) || isnan(x)) o[c] += x;
          }
        }
      }
    }
    if (SPLIT) {
      const uint part = first_part_of_row(batch, head, n, parts) + split;
      o_part[part * QUADS + quad] = o;
      if (quad == 0) lse_part[part] = row_lse[r];
    } else {
      const uint o_at = (tensor_base(VKF_TENSOR_O, batch, head, seq.q_row0) + n * tensor_row_stride(VKF_TENSOR_O)) / 4;
      o_h4[o_at + quad] = uvec2(packHalf2x16(o.xy), packHalf2x16(o.zw));
      if (WRITE_LSE && quad == 0) lse_data[lse_index(batch, head, seq, n)] = row_lse[r] * LN2;
    }
  }
}
