// FlashAttention-2 forward on workgroup-scope tensor cores (GL_NV_cooperative_matrix2), float16
// tensors, head dim a multiple of the device's granularity. One workgroup per (Q tile, head, batch).
// Every matrix here belongs to the whole workgroup: the driver splits it over the subgroups.
// Why it is built as it is (the measurements behind each choice: docs/tuning-log.md):
// - Q comes straight from its buffer through a tensor layout, which also clamps: rows past q_len
//   read as zero. At D = 128 a tile wholly below q_len loads unclamped, in vector loads: 1.2-2.8%
//   less time there on an H200, where D = 64 took up to 3% more and D = 256 7-9% more with a mask
//   or causal (docs/tuning-log.md, "the coopmat2 forward's Q in vector loads", thirteenth and
//   fourteenth sessions).
// - O leaves through the K/V tiles' shared memory (a matrix store there, then 16-byte copies of the
//   rows below q_len) where those tiles hold its rows: the tensor-layout store ran the whole
//   forward 4% slower at D = 64 (up to 10% with 1024 keys) on an H200 (docs/tuning-log.md,
//   "outputs through shared memory").
// - K and V rows are staged in shared memory by the whole workgroup (16-byte copies, rows past
//   kv_len zeroed) and the matrices loaded from there: loaded through tensor layouts, the driver
//   staged them in far more shared memory of its own, at more registers, and fewer workgroups fit
//   on an SM.
// - A step's buffer reads are issued before the barrier that waits for the previous step's matrix
//   loads, its shared-memory stores after it, so that the reads' latency can overlap the wait (the
//   driver may still issue them after it: common/stage_rows.glsl). Reading a whole step ahead was
//   slower.
// - No layout probe (unlike coopmat/attention_forward_coopmat.comp): the row max of the online
//   softmax is coopMatReduceNV, the row sum a product P x ones, and per-element work (masking, the
//   LSE store) is coopMatPerElementNV, which hands each element its row and column.
// - Row vectors (max, sum, rescale factor) are BLOCK_Q x STAT_COLUMNS matrices whose columns repeat
//   the row's value, STAT_COLUMNS being the device's narrowest matrix (its granularity), widened by
//   a "smear" reduction where a wider operand needs them: far fewer registers than row vectors as
//   wide as S, which also lets larger tiles fit.
// - O and l are rescaled at every step: FlashAttention-4's lazy rescale (only when some row's max
//   grows by more than 2^8) needs a workgroup-wide vote, a barrier per step, and was slower; the
//   exponentials it saves are not the limit.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require

#define VKF_DEFAULT_HEAD_DIM 128
#define VKF_DEFAULT_BLOCK_Q 64
#define VKF_DEFAULT_BLOCK_KV 64
#include "common/attention_preamble.glsl"
#include "common/shared_memory_sizes.h"
layout(constant_id = VKF_SPEC_WRITE_LSE) const bool WRITE_LSE = true;
layout(constant_id = VKF_SPEC_CM2_STAT_COLUMNS) const uint STAT_COLUMNS = 32;

#include "common/constants.glsl"

#include "common/attention_mask.glsl"
#define VKF_SCORE_MOD_BINDING_ALIBI VKF_FWD_BINDING_ALIBI
#define VKF_SCORE_MOD_BINDING_MASK VKF_FWD_BINDING_MASK
#define VKF_SCORE_MOD_BINDING_MASK_TILES VKF_FWD_BINDING_MASK_TILES
#define VKF_SCORE_MOD_BINDING_SINKS VKF_FWD_BINDING_SINKS
#define VKF_SCORE_MOD_BIAS_TILES
#include "common/score_mod.glsl"
#define VKF_SEQUENCES_BINDING VKF_FWD_BINDING_SEQUENCES
#include "common/sequences.glsl"  // strides are multiples of 8 elements here (the engine checks)

layout(std430, set = 0, binding = VKF_FWD_BINDING_Q) readonly buffer q_block { float16_t q_h[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_K) readonly buffer k_block { uvec4 k_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_V) readonly buffer v_block { uvec4 v_u4[]; };
// Read too, by the rare correction of non-finite values after the store (below), which reads
// elements other invocations stored: workgroupcoherent, and a barrier that makes them visible.
layout(std430, set = 0, binding = VKF_FWD_BINDING_O) workgroupcoherent buffer o_block { float16_t o_h[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_O) workgroupcoherent buffer o_u4_block { uvec4 o_u4[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_LSE) writeonly buffer lse_block { float lse_data[]; };

const uint ROW_U4 = VKF_ROW_U4(HEAD_DIM);          // a row of float16 as uvec4 words
const uint TILE_STRIDE = VKF_TILE_STRIDE(ROW_U4);  // padded shared row (see stage_rows.glsl)
shared uvec4 kv_tiles[VKF_SMEM_ROW_PAIR_U4(BLOCK_KV, TILE_STRIDE)];  // K rows [0, BLOCK_KV), then V rows
shared uint nonfinite_v;  // 1 once a tile that the band's edge crosses had an inf or NaN in V
#include "common/nonfinite.glsl"
#include "common/stage_rows.glsl"
const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);  // uvec4 words per tensor each invocation copies
VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_kv, store_kv, kv_tiles, k_u4, v_u4, BLOCK_KV, KV_WORDS)
const bool O_THROUGH_TILES = BLOCK_Q <= 2 * BLOCK_KV;  // the K/V tiles hold O's rows
const bool Q_WHOLE_TILES_UNCLAMPED = HEAD_DIM == 128;  // whole Q tiles unclamped (the header says why)
// A softcap alone capped element by element with the scale folded in (common/score_mod.glsl's
// softcap_alone): 1.1-1.6% less time at D = 64 on an H200; at D = 128 none, and 2% more with causal
// (docs/tuning-log.md, "the coopmat2 forward's softcap folded again").
const bool SOFTCAP_FOLDED = HEAD_DIM == 64;
VKF_DEFINE_UNSTAGE_ROWS(store_o_rows, kv_tiles, o_u4, BLOCK_Q)

#include "coopmat2/online_softmax.glsl"
#include "coopmat2/bias_tiles.glsl"
VKF_DEFINE_BIAS_TILE(bias_tile, gl_ScopeWorkgroup, BLOCK_Q, BLOCK_KV)
#include "common/closed_tiles.glsl"

// Band and kv_len masking of a tile's scores (row / col are tile-relative).
float mask_element(const uint row, const uint col, const float s, const uint q_begin, const uint kv_begin,
                   const uint q_len, const uint kv_len) {
  return key_visible(q_begin + row, kv_begin + col, q_len, kv_len) ? s : NEG_INF;
}

// The softcap, ALiBi and mask of a tile's scores (row / col are tile-relative); a float mask is
// added after, as a matrix (bias_tiles()).
float modify_score(const uint row, const uint col, const float s, const uint q_begin, const uint kv_begin,
                   const uint q_len, const uint kv_len, const ScoreHead modifiers) {
  return score_mod(s, modifiers, q_begin + row, kv_begin + col, q_len, kv_len);
}

// Column 0 of the LSE matrix holds each row's LSE; rows past q_len are not stored.
float store_lse(const uint row, const uint col, const float lse, const uint lse_row0, const uint rows_valid) {
  if (col == 0 && row < rows_valid) lse_data[lse_row0 + row] = lse;
  return lse;
}

// The first key tile from kv_begin on that the mask leaves open (kv_end or past it if none). The
// closed ones keep their place in the crossed runs: the fix-ups read the runs as without a mask.
// A loop of its own, not a `continue` at the top of the step, where the driver copied the
// loop-carried matrices on every closed tile (~180 instructions, mostly register moves: half the
// time of a call whose tiles were all closed at D = 64 on an H200; docs/tuning-log.md, "closed
// tiles passed over outside the step").
uint next_open_tile(uint kv_begin, const uint kv_end, const uint mask_summary, const uint q_begin, const uint q_end,
                    const uint q_len, const uint kv_len, inout CrossedRuns crossed) {
  for (; kv_begin < kv_end && tile_closed(mask_summary, true, kv_begin, BLOCK_KV, kv_len, q_begin, q_end);
       kv_begin += BLOCK_KV) {
    if (tile_crosses_band(q_begin, q_end - q_begin, kv_begin, BLOCK_KV, q_len, kv_len)) {
      note_crossed_tile(crossed, kv_begin, kv_begin + BLOCK_KV);
    }
  }
  return kv_begin;
}

void main() {
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);  // GQA / MQA
  const Sequence seq = sequence_of(batch);
  const uint q_len = seq.q_len, kv_len = seq.kv_len;
  const uint q_begin = gl_WorkGroupID.x * BLOCK_Q;
  if (q_begin >= q_len) return;  // past this batch entry's queries
  const uint q_end = min(q_begin + BLOCK_Q, q_len);
  // Element offsets of each tensor's row 0 of this head, and row strides (in halves).
  const uint q_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0);
  const uint o_base = tensor_base(VKF_TENSOR_O, batch, head, seq.q_row0), o_stride = tensor_row_stride(VKF_TENSOR_O);
  const uint k_base = tensor_base(VKF_TENSOR_K, batch, kv_head, seq.kv_row0), k_stride = tensor_row_stride(VKF_TENSOR_K);
  const uint v_base = tensor_base(VKF_TENSOR_V, batch, kv_head, seq.kv_row0), v_stride = tensor_row_stride(VKF_TENSOR_V);

  // [q_len, HEAD_DIM] with the tensors' row strides; reads past the last row give 0, and the
  // tensor-layout store of O (where the K/V tiles cannot hold its rows) drops writes there.
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> q_layout =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  q_layout = setTensorLayoutDimensionNV(q_layout, q_len, HEAD_DIM);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> o_layout = setTensorLayoutStrideNV(q_layout, o_stride, 1);
  q_layout = setTensorLayoutStrideNV(q_layout, tensor_row_stride(VKF_TENSOR_Q), 1);

  // Q stays exactly as stored; the softmax scale is applied to S.
  coopmat<float16_t, gl_ScopeWorkgroup, BLOCK_Q, HEAD_DIM, gl_MatrixUseA> q_tile;
  if (Q_WHOLE_TILES_UNCLAMPED && q_begin + BLOCK_Q <= q_len) {
    // A tile wholly below q_len needs no clamping: unclamped, with its base and stride masked to
    // whole 16-byte words (which they are: the engine runs this kernel only on vector-aligned views
    // and strides, forward_op.cc), the driver loads it in vector loads.
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeUndefinedNV> q_words =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeUndefinedNV);
    q_words = setTensorLayoutDimensionNV(q_words, q_len, HEAD_DIM);
    q_words = setTensorLayoutStrideNV(q_words, tensor_row_stride(VKF_TENSOR_Q) & ~7u, 1);
    coopMatLoadTensorNV(q_tile, q_h, q_base & ~7u, sliceTensorLayoutNV(q_words, q_begin, BLOCK_Q, 0, HEAD_DIM));
  } else {
    coopMatLoadTensorNV(q_tile, q_h, q_base, sliceTensorLayoutNV(q_layout, q_begin, BLOCK_Q, 0, HEAD_DIM));
  }

  ROWS_X_DIM(float) o_acc = ROWS_X_DIM(float)(0.0);
  // Every column holds the row's value, from the floor (coopmat2/online_softmax.glsl); the sink
  // joins at the end.
  ROW_VECTOR(float) m_run = ROW_VECTOR(float)(NEG_HALF_FLT_MAX);
  ROW_VECTOR(float) depth_run = ROW_VECTOR(float)(0.0);  // P, l and O are measured from m_run - depth_run
  ROW_VECTOR(float) l_run = ROW_VECTOR(float)(0.0);
  const ScoreHead modifiers = score_head(batch, head);
  const uint mask_summary = mask_summary_base(batch, head);  // for the tiles the mask closes

  const ONES_COLUMNS ones = ONES_COLUMNS(1.0);
  const float softcap_power = pc.scale_log2 * (2.0 / SOFTCAP);  // SOFTCAP_FOLDED's
  if (gl_LocalInvocationIndex == 0) nonfinite_v = 0;  // before the first step's barriers
  // Tiles wholly outside the rows' band are never visited.
  const uint q_rows = q_end - q_begin;
  const uint kv_first = first_visible_kv_tile(q_begin, BLOCK_KV, q_len, kv_len);
  const uint kv_end = visible_kv_end(q_begin, q_end, q_len, kv_len);
  CrossedRuns crossed = no_crossed_tiles(kv_first, kv_len);  // where V was zeroed
  if (MASK != VKF_MASK_NONE) find_closed_tiles(mask_summary, true, kv_first, kv_end, BLOCK_KV, kv_len, q_begin, q_end);
  // Whether a step ran (its barriers made nonfinite_v's zero visible): a mask can close every tile.
  bool staged = false;
  [[dont_unroll]] for (uint kv_begin = next_open_tile(kv_first, kv_end, mask_summary, q_begin, q_end, q_len, kv_len, crossed);
                       kv_begin < kv_end;
                       kv_begin = next_open_tile(kv_begin + BLOCK_KV, kv_end, mask_summary, q_begin, q_end, q_len, kv_len, crossed)) {
    staged = true;
    // stage this step's K and V rows: read them while waiting for every matrix load of the
    // previous step, then store (zeroing V's infinities and NaNs where the band's edge crosses
    // the tile)
    const bool masked_tile = tile_needs_mask(q_begin, q_rows, kv_begin, BLOCK_KV, q_len, kv_len);
    // A float32 bias tile is loaded first, so that its reads' latency overlaps the staging and the
    // product (a float16 one converts as it loads, which waits for the reads: it loads after S).
    const bool bias_first = bias_tiles() && MASK == VKF_MASK_FLOAT32;
    ROWS_X_KEYS(float) first_bias;
    if (bias_first) first_bias = bias_tile(modifiers.mask_base, q_begin, kv_begin);
    uvec4 k_words[KV_WORDS], v_words[KV_WORDS];
    load_kv(k_words, v_words, (k_base + kv_begin * k_stride) / 8, k_stride / 8, (v_base + kv_begin * v_stride) / 8,
            v_stride / 8, min(BLOCK_KV, kv_len - kv_begin));
    barrier();
    if (tile_crosses_band(q_begin, q_rows, kv_begin, BLOCK_KV, q_len, kv_len)) {
      note_crossed_tile(crossed, kv_begin, kv_begin + BLOCK_KV);
      bool found = false;
      VKF_ZERO_NONFINITE(v_words, KV_WORDS, found);
      if (found) atomicOr(nonfinite_v, 1u);
    }
    store_kv(k_words, v_words);
    barrier();

    // S = Q K^T, in base-2 units (K^T: the staged K rows read column-major)
    coopmat<float16_t, gl_ScopeWorkgroup, HEAD_DIM, BLOCK_KV, gl_MatrixUseB> k_t;
    coopMatLoad(k_t, kv_tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
    ROWS_X_KEYS(float) s = coopMatMulAdd(q_tile, k_t, ROWS_X_KEYS(float)(0.0));
    if (SOFTCAP_FOLDED && softcap_alone()) {
      [[unroll]] for (uint i = 0; i < s.length(); ++i) s[i] = softcapped_raw(s[i], softcap_power);
    } else {
      s *= pc.scale_log2;
      if (scores_modified()) coopMatPerElementNV(s, s, modify_score, q_begin, kv_begin, q_len, kv_len, modifiers);
    }
    if (bias_first) {
      s += first_bias;
    } else if (bias_tiles()) {
      s += bias_tile(modifiers.mask_base, q_begin, kv_begin);
    }
    if (masked_tile) coopMatPerElementNV(s, s, mask_element, q_begin, kv_begin, q_len, kv_len);

    online_softmax_step(s, ones, o_acc, m_run, depth_run, l_run);
  }

  // Epilogue: the sink joins, O = acc / l, LSE = m + log2(l) (finish_row). A row that saw no key:
  // O = 0, LSE = -inf or its sink; a row whose scores held NaN: l is NaN, and so are O and LSE.
  ROW_VECTOR(float) o_scale, lse;
  finish_rows(m_run, depth_run, l_run, ROW_VECTOR(float)(sink_log2(head)), o_scale, lse);
  const ROWS_X_DIM(float16_t) o_out = ROWS_X_DIM(float16_t)(scaled_o(o_acc, o_scale));
  if (O_THROUGH_TILES) {
    barrier();  // every matrix load of the last step is done before O overwrites the tiles
    coopMatStore(o_out, kv_tiles, 0, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    store_o_rows((o_base + q_begin * o_stride) / 8, o_stride / 8, q_rows);
  } else {
    coopMatStoreTensorNV(o_out, o_h, o_base, sliceTensorLayoutNV(o_layout, q_begin, BLOCK_Q, 0, HEAD_DIM));
  }

  // Infinities and NaNs of V that the staging zeroed, added where the rows see them (rare: the
  // flag was raised before the last step's second barrier; common/nonfinite.glsl). The whole
  // workgroup does it on the stored O, element by element: any per-element operation on an O-shaped
  // matrix, even after the loop, cost the H100 3.5% at D=128 (docs/tuning-log.md). inf / l is inf.
  if (staged && nonfinite_v != 0) {
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer,
                   gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible);
    for (uint e = gl_LocalInvocationIndex; e < BLOCK_Q * HEAD_DIM; e += WORKGROUP_SIZE) {
      const uint q_row = q_begin + e / HEAD_DIM, column = e % HEAD_DIM;
      if (q_row >= q_len) continue;
      const uint at = o_base + q_row * o_stride + column;
      float o = float(o_h[at]);
      // the row's keys in the crossed tiles
      const uvec4 keys = crossed_part(crossed, row_keys_begin(q_row, q_len, kv_len), row_keys_end(q_row, q_len, kv_len));
      [[unroll]] for (uint run = 0; run < 2; ++run) {
        for (uint key = keys[2 * run]; key < keys[2 * run + 1]; ++key) {
          const float x = VKF_BUFFER_HALF(v_u4, v_base + key * v_stride + column);
          if (isinf(x) || isnan(x)) o += x;
        }
      }
      o_h[at] = float16_t(o);
    }
  }

  if (WRITE_LSE) {
    lse *= LN2;
    coopMatPerElementNV(lse, lse, store_lse, lse_index(batch, head, seq, q_begin), q_end - q_begin);
  }
}
