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

float row_max(const float a, const float b) { return max(a, b); }
float smear(const float a, const float b) { return a; }  // widens a row-reduced matrix
float exp2_element(const uint row, const uint col, const float x) { return exp2(x); }

// One tile of keys: s holds its scores in base-2 units (scaled and masked); the running max m_run,
// the sum l_run and the unnormalized O o_acc take it in. `ones` is ONES_COLUMNS(1.0).
void online_softmax_step(const ROWS_X_KEYS(float) s, const ONES_COLUMNS ones, inout ROWS_X_DIM(float) o_acc,
                         inout ROW_VECTOR(float) m_run, inout ROW_VECTOR(float) l_run) {
  // m_new = max(m_run, rowmax(S)), P = exp2(S - m_new), alpha = exp2(m_run - m_new)
  ROW_VECTOR(float) tile_max;
  coopMatReduceNV(tile_max, s, gl_CooperativeMatrixReduceRowNV, row_max);
  ROW_VECTOR(float) m_new;
  [[unroll]] for (uint i = 0; i < m_new.length(); ++i) m_new[i] = max(m_run[i], tile_max[i]);
  ROWS_X_KEYS(float) m_new_wide;
  coopMatReduceNV(m_new_wide, m_new, gl_CooperativeMatrixReduceRowNV, smear);
  ROWS_X_KEYS(float) p;
  coopMatPerElementNV(p, s - m_new_wide, exp2_element);
  ROW_VECTOR(float) alpha;
  coopMatPerElementNV(alpha, m_run - m_new, exp2_element);
  m_run = m_new;

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

// O = acc / l; a row that saw no key (l = 0) gets 0, a row whose scores held NaN NaN.
ROWS_X_DIM(float) normalized_o(const ROWS_X_DIM(float) o_acc, const ROW_VECTOR(float) l_run) {
  ROW_VECTOR(float) inv_l;
  [[unroll]] for (uint i = 0; i < inv_l.length(); ++i) inv_l[i] = l_run[i] == 0.0 ? 0.0 : 1.0 / l_run[i];
  ROWS_X_DIM(float) inv_l_wide;
  coopMatReduceNV(inv_l_wide, inv_l, gl_CooperativeMatrixReduceRowNV, smear);
  return o_acc * inv_l_wide;
}

// The rows' LSE in base 2: m + log2(l), -inf for a row that saw no key.
ROW_VECTOR(float) lse_log2(const ROW_VECTOR(float) m_run, const ROW_VECTOR(float) l_run) {
  ROW_VECTOR(float) lse;
  [[unroll]] for (uint i = 0; i < lse.length(); ++i) lse[i] = l_run[i] == 0.0 ? NEG_INF : m_run[i] + log2(l_run[i]);
  return lse;
}

#endif
