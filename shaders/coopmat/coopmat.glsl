// Cooperative-matrix vocabulary shared by the tensor-core kernels, for two extensions:
//   VKF_COOPMAT_KHR = 0: GL_NV_cooperative_matrix (Debian's glslang 12 compiles it);
//   VKF_COOPMAT_KHR = 1: GL_KHR_cooperative_matrix (needs glslang >= 13; AMD, Intel, NVIDIA).
// Every matrix is 16 x 16 (K = 16) with subgroup scope: float16 operands, float32 accumulators.
//
// The kernels never assume how a device spreads an accumulator over its lanes. At start-up the
// engine runs coopmat/coopmat_layout_probe.comp and passes what it learned as specialization
// constants: which of a lane's elements share a row (a "slot"), and which lane bits tell the
// lanes of one row apart. Element coordinates come from a coordinate matrix (load_coordinates in
// coopmat/coopmat_tiles.glsl, read with cm_row / cm_col below).
// Include after the specialization constants VKF_CM_* are declared.
#ifndef VKFLASH_COOPMAT_GLSL
#define VKFLASH_COOPMAT_GLSL

#if VKF_COOPMAT_KHR
#define VKF_ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define VKF_ACC16 coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define VKF_MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define VKF_MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define cm_load_rows(m, buf, offset, stride) coopMatLoad(m, buf, offset, stride, gl_CooperativeMatrixLayoutRowMajor)
#define cm_load_cols(m, buf, offset, stride) coopMatLoad(m, buf, offset, stride, gl_CooperativeMatrixLayoutColumnMajor)
#define cm_store_rows(m, buf, offset, stride) coopMatStore(m, buf, offset, stride, gl_CooperativeMatrixLayoutRowMajor)
#define cm_mul_add(a, b, c) coopMatMulAdd(a, b, c)
#else
#define VKF_ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define VKF_ACC16 fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define VKF_MAT_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define VKF_MAT_B fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define cm_load_rows(m, buf, offset, stride) coopMatLoadNV(m, buf, offset, stride, false)
#define cm_load_cols(m, buf, offset, stride) coopMatLoadNV(m, buf, offset, stride, true)
#define cm_store_rows(m, buf, offset, stride) coopMatStoreNV(m, buf, offset, stride, false)
#define cm_mul_add(a, b, c) coopMatMulAddNV(a, b, c)
#endif

// Slot (which of the lane's rows) of accumulator element i: 4 bits per element, from the probe.
uint cm_slot(uint i) { return ((i < 8 ? VKF_CM_SLOTS_LO >> (4 * i) : VKF_CM_SLOTS_HI >> (4 * (i - 8))) & 15u); }

// True for the first element of its slot (one writer per row and lane).
bool cm_first_of_slot(uint i) {
  for (uint j = 0; j < i; ++j)
    if (cm_slot(j) == cm_slot(i)) return false;
  return true;
}

// Reductions over the lanes that hold parts of the same accumulator row.
float cm_row_max(float x) {
  for (uint bit = 1; bit < VKF_CM_SUBGROUP_SIZE; bit <<= 1)
    if ((VKF_CM_ROW_LANE_MASK & bit) != 0) x = max(x, subgroupShuffleXor(x, bit));
  return x;
}
float cm_row_sum(float x) {
  for (uint bit = 1; bit < VKF_CM_SUBGROUP_SIZE; bit <<= 1)
    if ((VKF_CM_ROW_LANE_MASK & bit) != 0) x += subgroupShuffleXor(x, bit);
  return x;
}

// Row and column of accumulator element i, from the coordinate matrix (element value 16 * row +
// column): every accumulator of the kernel shares its layout.
uint cm_row(VKF_ACC coord, uint i) { return uint(coord[i]) >> 4; }
uint cm_col(VKF_ACC coord, uint i) { return uint(coord[i]) & 15u; }

#endif
