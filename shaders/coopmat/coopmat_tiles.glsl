// Helpers of the cooperative-matrix kernels that need shared memory: the coordinate matrix, and
// turning a float32 accumulator into a float16 A operand. Needs WORKGROUP_SIZE and SUBGROUPS.
#ifndef VKFLASH_COOPMAT_TILES_GLSL
#define VKFLASH_COOPMAT_TILES_GLSL

#include "common/shared_memory_sizes.h"
#include "common/stage_rows.glsl"

shared float cm_coord_values[VKF_SMEM_CM_COORD_FLOATS];  // 16 * row + column

// The accumulator whose element (r, c) is 16 r + c: with cm_row / cm_col it gives the position of
// every element of every accumulator. Call once, from uniform control flow (it has a barrier).
VKF_ACC load_coordinates() {
  for (uint i = gl_LocalInvocationIndex; i < 256; i += WORKGROUP_SIZE) cm_coord_values[i] = float(i);
  barrier();
  VKF_ACC coord;
  cm_load_rows(coord, cm_coord_values, 0, 16);
  return coord;
}

// Statement: loads the 16 x HEAD_DIM rows from row `row0` of a float16 tensor (element
// head_base + row * stride + column; head_base and stride multiples of 8) into the A operands
// frags[first .. first + D_BLOCKS):
// straight from memory when all 16 rows exist, else element by element (rows >= row_end read as
// zeros) through an accumulator-layout matrix and acc_to_a. A macro, not a function: arrays of
// matrices passed to functions are copied, and drivers may then leave them in local memory.
#define VKF_LOAD_ROW_BLOCK(frags, first, buffer_u4, buffer_h, coord, head_base, stride, row0, row_end)    \
  [[unroll]] for (uint kb_ = 0; kb_ < D_BLOCKS; ++kb_) {                                                  \
    if ((row0) + 16 <= (row_end)) {                                                                       \
      cm_load_rows(frags[(first) + kb_], buffer_u4, ((head_base) + (row0) * (stride)) / 8 + 2 * kb_, (stride) / 8); \
    } else {                                                                                              \
      VKF_ACC part_;                                                                                      \
      [[unroll]] for (uint i_ = 0; i_ < VKF_CM_ELEMENTS; ++i_) {                                           \
        const uint r_ = (row0) + cm_row(coord, i_);                                                       \
        part_[i_] = r_ < (row_end) ? float(buffer_h[(head_base) + r_ * (stride) + 16 * kb_ + cm_col(coord, i_)]) : 0.0; \
      }                                                                                                   \
      frags[(first) + kb_] = acc_to_a(part_);                                                             \
    }                                                                                                     \
  }

// Statement: stores accumulators acc[first .. first + D_BLOCKS) as the float16 rows row0 ..
// row0 + 15 of a tensor laid out as above; rows >= row_end are left alone.
#define VKF_STORE_ROW_BLOCK(acc, first, buffer_u4, buffer_h, coord, head_base, stride, row0, row_end)    \
  [[unroll]] for (uint db_ = 0; db_ < D_BLOCKS; ++db_) {                                                  \
    if ((row0) + 16 <= (row_end)) {                                                                       \
      cm_store_rows(VKF_ACC16(acc[(first) + db_]), buffer_u4, ((head_base) + (row0) * (stride)) / 8 + 2 * db_, (stride) / 8); \
    } else {                                                                                              \
      [[unroll]] for (uint i_ = 0; i_ < VKF_CM_ELEMENTS; ++i_) {                              \
        const uint r_ = (row0) + cm_row(coord, i_);                                                       \
        if (r_ < (row_end)) buffer_h[(head_base) + r_ * (stride) + 16 * db_ + cm_col(coord, i_)] = float16_t(acc[(first) + db_][i_]); \
      }                                                                                                   \
    }                                                                                                     \
  }

#if VKF_COOPMAT_KHR
// KHR matrices carry their use: an accumulator becomes an A operand by an element copy where the
// layout probe found A laid out like the accumulator (NVIDIA's), else through a per-subgroup 16x16
// float16 scratch (a store, two subgroup barriers and a load).
shared float16_t cm_a_scratch[VKF_SMEM_CM_A_SCRATCH_HALVES(SUBGROUPS)];
VKF_MAT_A acc_to_a(VKF_ACC acc) {
  if (VKF_CM_A_LIKE_ACC) {
    VKF_MAT_A a;
    [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) a[i] = float16_t(acc[i]);
    return a;
  }
  const VKF_ACC16 half_acc = VKF_ACC16(acc);
  cm_store_rows(half_acc, cm_a_scratch, gl_SubgroupID * 256, 16);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  VKF_MAT_A a;
  cm_load_rows(a, cm_a_scratch, gl_SubgroupID * 256, 16);
  subgroupBarrier();  // the scratch is rewritten by the next call
  return a;
}
#else
// NV matrices have no use: converting the component type is all it takes.
VKF_MAT_A acc_to_a(VKF_ACC acc) { return VKF_MAT_A(acc); }
#endif

#endif
