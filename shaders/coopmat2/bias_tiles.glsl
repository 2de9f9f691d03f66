// A float mask / bias added to a tile of scores as one matrix (GL_NV_cooperative_matrix2 kernels),
// where common/score_mod.glsl's bias_tiles() holds: one tensor load per tile instead of an element
// read per score inside the per-element callback. The mask's -inf added to a finite score gives
// -inf (the pair is blocked); to an infinite or NaN one (an inf or NaN in the pair's Q or K row)
// NaN, where the per-element path gives -inf. docs/design.md requires a blocked pair's Q, K and V
// rows to be finite, as the gradient kernels multiply them by zeros in every family.
// Clamped to the edge, the load reads the mask's last row or key past its own (padding rows and keys,
// as mask_bias_log2 does) and broadcasts a mask without the rows or keys dimension.
// Include after common/score_mod.glsl, with VKF_SCORE_MOD_BIAS_TILES defined before it; needs 16-bit
// storage.
#ifndef VKFLASH_COOPMAT2_BIAS_TILES_GLSL
#define VKFLASH_COOPMAT2_BIAS_TILES_GLSL

layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_MASK) readonly buffer mask_f32_block { float mask_f32[]; };
layout(std430, set = 0, binding = VKF_SCORE_MOD_BINDING_MASK) readonly buffer mask_f16_block { float16_t mask_f16[]; };

// The mask head's [rows, keys] as stored (1 along a dimension it broadcasts).
tensorLayoutNV<2, gl_CooperativeMatrixClampModeClampToEdgeNV> bias_layout() {
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeClampToEdgeNV> bias =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeClampToEdgeNV);
  const uint keys = mask_stored_keys(pc.mask_kv_len);
  bias = setTensorLayoutDimensionNV(bias, mask_stored_rows(pc.mask_q_len), keys);
  return setTensorLayoutStrideNV(bias, keys, 1);
}

#define VKF_COMMA ,  // a comma inside a macro argument (VKF_LOAD_BIAS's VIEW)

// Mask elements per 16-byte word.
const uint BIAS_PER_WORD = MASK == VKF_MASK_FLOAT16 ? 8u : 4u;

// Whether rows [q0, q0 + rows) x keys [k0, k0 + cols) lie inside a mask with both dimensions whose
// rows are whole 16-byte words: such a tile loads unclamped (bias_layout_unclamped), which the
// driver does in vector loads; the clamped load reads element by element and cost the H100's
// forward as much again as the plain kernel (docs/tuning-log.md).
bool bias_tile_unclamped(const uint q0, const uint rows, const uint k0, const uint cols) {
  const uint both = VKF_MASK_HAS_ROWS | VKF_MASK_HAS_KEYS;
  return (MASK_DIMS & both) == both && pc.mask_kv_len % BIAS_PER_WORD == 0 && q0 + rows <= pc.mask_q_len &&
         k0 + cols <= pc.mask_kv_len;
}
// Where bias_tile_unclamped holds; the strides and base (a multiple of the row length) are masked
// to whole words, which they are, so that the compiler knows it.
tensorLayoutNV<2, gl_CooperativeMatrixClampModeUndefinedNV> bias_layout_unclamped() {
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeUndefinedNV> bias =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeUndefinedNV);
  const uint keys = pc.mask_kv_len & ~(BIAS_PER_WORD - 1);
  bias = setTensorLayoutDimensionNV(bias, pc.mask_q_len, keys);
  return setTensorLayoutStrideNV(bias, keys, 1);
}

// Loads into bias (a float16 or float matrix, the mask's type) the mask's elements of query rows
// [q0, q0 + Q_ROWS) x keys [k0, k0 + K_COLS), through tensor view VIEW.
#define VKF_LOAD_BIAS(bias, buffer, mask_base, q0, Q_ROWS, k0, K_COLS, VIEW)                                   \
  if (bias_tile_unclamped(q0, Q_ROWS, k0, K_COLS)) {                                                         \
    coopMatLoadTensorNV(bias, buffer, (mask_base) & ~(BIAS_PER_WORD - 1),                                     \
                        sliceTensorLayoutNV(bias_layout_unclamped(), q0, Q_ROWS, k0, K_COLS) VIEW);           \
  } else {                                                                                                   \
    coopMatLoadTensorNV(bias, buffer, mask_base, sliceTensorLayoutNV(bias_layout(), q0, Q_ROWS, k0, K_COLS) VIEW); \
  }

// The bias of query rows [q0, q0 + ROWS) x keys [k0, k0 + COLS) in base-2 units, as a float
// accumulator matrix to add to the scores. `mask_base`: ScoreHead.mask_base. bias_tiles() must hold.
#define VKF_DEFINE_BIAS_TILE(NAME, SCOPE, ROWS, COLS)                                                              \
  coopmat<float, SCOPE, ROWS, COLS, gl_MatrixUseAccumulator> NAME(const uint mask_base, const uint q0, const uint k0) { \
    if (MASK == VKF_MASK_FLOAT16) {                                                                              \
      coopmat<float16_t, SCOPE, ROWS, COLS, gl_MatrixUseAccumulator> bias;                                       \
      VKF_LOAD_BIAS(bias, mask_f16, mask_base, q0, ROWS, k0, COLS, )                                             \
      return coopmat<float, SCOPE, ROWS, COLS, gl_MatrixUseAccumulator>(bias) * LOG2E;                           \
    }                                                                                                            \
    coopmat<float, SCOPE, ROWS, COLS, gl_MatrixUseAccumulator> bias;                                             \
    VKF_LOAD_BIAS(bias, mask_f32, mask_base, q0, ROWS, k0, COLS, )                                               \
    return bias * LOG2E;                                                                                         \
  }

// The same for a transposed tile (rows are keys [k0, k0 + ROWS), columns queries [q0, q0 + COLS)):
// the dK/dV kernel's S^T. A second macro rather than one with an identity tensor view for the plain
// tile: with that view the H100's driver took 6-40% longer over the plain tiles (docs/tuning-log.md).
#define VKF_DEFINE_BIAS_TILE_TRANSPOSED(NAME, SCOPE, ROWS, COLS)                                                   \
  coopmat<float, SCOPE, ROWS, COLS, gl_MatrixUseAccumulator> NAME(const uint mask_base, const uint q0, const uint k0) { \
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);                                 \
    if (MASK == VKF_MASK_FLOAT16) {                                                                              \
      coopmat<float16_t, SCOPE, ROWS, COLS, gl_MatrixUseAccumulator> bias;                                       \
      VKF_LOAD_BIAS(bias, mask_f16, mask_base, q0, COLS, k0, ROWS, VKF_COMMA transposed)                        \
      return coopmat<float, SCOPE, ROWS, COLS, gl_MatrixUseAccumulator>(bias) * LOG2E;                           \
    }                                                                                                            \
    coopmat<float, SCOPE, ROWS, COLS, gl_MatrixUseAccumulator> bias;                                             \
    VKF_LOAD_BIAS(bias, mask_f32, mask_base, q0, COLS, k0, ROWS, VKF_COMMA transposed)                          \
    return bias * LOG2E;                                                                                         \
  }

#endif
