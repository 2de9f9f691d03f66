// The FlashAttention-2 step on workgroup-scope matrices (GL_NV_cooperative_matrix2), shared by the
// forward kernels that stage K and V rows in `kv_tiles` (K rows [0, BLOCK_KV), then V rows, at
// TILE_STRIDE): coopmat2/attention_forward_coopmat2.comp and decode/attention_forward_decode_coopmat2.comp.
// Needs BLOCK_Q, BLOCK_KV, HEAD_DIM, STAT_COLUMNS and TILE_STRIDE. Why it is built as it is: the
// header of attention_forward_coopmat2.comp.
#ifndef VKFLASH_COOPMAT2_ONLINE_SOFTMAX_GLSL
#define VKFLASH_COOPMAT2_ONLINE_SOFTMAX_GLSL

#define ROWS_X_KEYS(T) coopmat<T, gl_ScopeWorkgroup, BLOCK_Q, BLOCK_KV, gl_MatrixUseAccumulator>
#define ROWS_X_DIM(T) coopmat<T, gl_ScopeWorkgroup, BLOCK_Q, HEAD_DIM, gl_MatrixUseAccumulator>
// Row vectors: BLOCK_Q x STAT_COLUMNS, every column holding the row's value.
#define ROW_VECTOR(T) coopmat<T, gl_ScopeWorkgroup, BLOCK_Q, STAT_COLUMNS, gl_MatrixUseAccumulator>
#define ONES_COLUMNS coopmat<float16_t, gl_ScopeWorkgroup, BLOCK_KV, STAT_COLUMNS, gl_MatrixUseB>

// Where a row's running max starts: finite, so that neither m_new - tile max nor m_old - m_new is
// -inf - -inf (NaN) for a row that has seen only masked keys so far. A finite base-2 score below it
// (a bias below about -1.18e38) counts as masked.
#define NEG_HALF_FLT_MAX uintBitsToFloat(0xfeffffffu)

float row_max(const float a, const float b) { return max(a, b); }
float smear(const float a, const float b) { return a; }  // widens a row-reduced matrix
float exp2_element(const uint row, const uint col, const float x) { return exp2(x); }

// One tile of keys: s holds its scores in base-2 units (scaled and masked); the running max m_run,
// the reference depth depth_run (common/score_mod.glsl's reference_depth: P, O and l are measured
// from m_run - depth_run), the sum l_run and the unnormalized O o_acc take it in. `ones` is
// ONES_COLUMNS(1.0).
void online_softmax_step(const ROWS_X_KEYS(float) s, const ONES_COLUMNS ones, inout ROWS_X_DIM(float) o_acc,
                         inout ROW_VECTOR(float) m_run, inout ROW_VECTOR(float) depth_run, inout ROW_VECTOR(float) l_run) {
  // m_new = max(m_run, rowmax(S)), reference = m_new - depth, P = exp2(S - reference),
  // alpha = exp2(old reference - new).
  ROW_VECTOR(float) tile_max;
  coopMatReduceNV(tile_max, s, gl_CooperativeMatrixReduceRowNV, row_max);
  ROW_VECTOR(float) ref_new, rescale_log2;
  [[unroll]] for (uint i = 0; i < ref_new.length(); ++i) {
    // m_run starts at the finite floor: the guards of reference_depth and reference_rescale_log2
    // against -inf - -inf cost coopmat2 0.6% at D = 64 (docs/tuning-log.md).
    const float m_new = max(m_run[i], tile_max[i]), depth_new = reference_depth_finite(m_new, tile_max[i]);
    rescale_log2[i] = reference_rescale_log2_finite(m_run[i], depth_run[i], m_new, depth_new);
    ref_new[i] = m_new - depth_new;
    m_run[i] = m_new;
    depth_run[i] = depth_new;
  }
  ROWS_X_KEYS(float) ref_wide;
  coopMatReduceNV(ref_wide, ref_new, gl_CooperativeMatrixReduceRowNV, smear);
  ROWS_X_KEYS(float) p;
  coopMatPerElementNV(p, s - ref_wide, exp2_element);
  ROW_VECTOR(float) alpha;
  coopMatPerElementNV(alpha, rescale_log2, exp2_element);

  const coopmat<float16_t, gl_ScopeWorkgroup, BLOCK_Q, BLOCK_KV, gl_MatrixUseA> p_a =
      coopmat<float16_t, gl_ScopeWorkgroup, BLOCK_Q, BLOCK_KV, gl_MatrixUseA>(p);
  // Row sums on the tensor cores, P x ones (l sums the same float16 P that multiplies V): faster
  // than coopMatReduceNV (docs/tuning-log.md).
  const ROW_VECTOR(float) tile_sum = coopMatMulAdd(p_a, ones, ROW_VECTOR(float)(0.0));
  l_run = alpha * l_run + tile_sum;

  // rescale O (alpha widened to HEAD_DIM columns), then O += P V
  ROWS_X_DIM(float) alpha_wide;
  coopMatReduceNV(alpha_wide, alpha, gl_CooperativeMatrixReduceRowNV, smear);
  o_acc *= alpha_wide;
  coopmat<float16_t, gl_ScopeWorkgroup, BLOCK_KV, HEAD_DIM, gl_MatrixUseB> v_tile;
  coopMatLoad(v_tile, kv_tiles, BLOCK_KV * TILE_STRIDE, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
  o_acc = coopMatMulAdd(p_a, v_tile, o_acc);
}

// The rows' ends (common/score_mod.glsl's finish_row), with each row's sink (base 2; -inf: none):
// O's scale (1 / l, 0 for a row that saw no key) and the base-2 LSE.
void finish_rows(const ROW_VECTOR(float) m_run, const ROW_VECTOR(float) depth_run, const ROW_VECTOR(float) l_run,
                 const ROW_VECTOR(float) sinks, out ROW_VECTOR(float) o_scale, out ROW_VECTOR(float) lse) {
  [[unroll]] for (uint i = 0; i < lse.length(); ++i) {
    float scale, row_lse;
    finish_row(m_run[i], depth_run[i], l_run[i], sinks[i], scale, row_lse);
    o_scale[i] = scale;
    lse[i] = row_lse;
  }
}

// O = acc x its row's scale.
ROWS_X_DIM(float) scaled_o(const ROWS_X_DIM(float) o_acc, const ROW_VECTOR(float) o_scale) {
  ROWS_X_DIM(float) scale_wide;
  coopMatReduceNV(scale_wide, o_scale, gl_CooperativeMatrixReduceRowNV, smear);
  return o_acc * scale_wide;
}

#endif
