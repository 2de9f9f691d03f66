// Helpers of the cooperative-matrix kernels that need shared memory: the coordinate matrix, and
// row blocks between memory and matrices, and turning a float32 accumulator into a float16 A
// operand. Needs WORKGROUP_SIZE, SUBGROUPS and D_BLOCKS.
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

// A 16 x 16 float16 block per subgroup (16 rows of two uvec4 words): the row blocks of a tensor go
// through it on their way between memory and matrices (VKF_LOAD_ROW_BLOCK, VKF_STORE_ROW_BLOCK), and
// in the KHR kernels an accumulator on its way to an A operand (acc_to_a).
shared uvec4 cm_block_scratch[VKF_SMEM_CM_BLOCK_SCRATCH_U4(SUBGROUPS)];
const uint CM_BLOCK_WORDS = 32;  // uvec4 words of one block
#define CM_BLOCK_SCRATCH (gl_SubgroupID * CM_BLOCK_WORDS)  // this subgroup's block
// Words of a block each lane copies (lanes past the block's words copy none).
const uint CM_BLOCK_WORDS_PER_LANE = (CM_BLOCK_WORDS + VKF_CM_SUBGROUP_SIZE - 1) / VKF_CM_SUBGROUP_SIZE;

// The uvec4 word in memory of a row block's word w (of CM_BLOCK_WORDS) in its 16 x 16 block `block`:
// half w % 2 of that block's 16 halves in row `row` (= the block's first row + w / 2). head_base
// and stride in halves, multiples of 8. A macro, so that the loads and stores compile as before.
#define VKF_CM_BLOCK_WORD(head_base, stride, row, block, w) (((head_base) + (row) * (stride)) / 8 + 2 * (block) + (w) % 2)

// Statement: loads the 16 x HEAD_DIM rows from row `row0` of a float16 tensor (element
// head_base + row * stride + column; head_base and stride multiples of 8) into the A operands
// frags[first .. first + D_BLOCKS); rows >= row_end read as zeros. Each 16 x 16 block goes through
// the subgroup's scratch, so that full and partial row blocks take one way: a branch between a
// matrix load from memory and an element-by-element one, whose results merge into the same
// matrices, doubled the backward kernels' code and local memory on NVIDIA's driver and ran them
// 1.5x slower (docs/tuning-log.md). Every load of the rows is issued before the first block is
// stored. A macro, not a function: arrays of matrices passed to functions are copied, and drivers
// may then leave them in local memory. From uniform control flow (subgroup barriers).
#define VKF_LOAD_ROW_BLOCK(frags, first, buffer_u4, head_base, stride, row0, row_end)                     \
  {                                                                                                       \
    uvec4 words_[D_BLOCKS * CM_BLOCK_WORDS_PER_LANE];                                                     \
    [[unroll]] for (uint kb_ = 0; kb_ < D_BLOCKS; ++kb_) {                                                \
      [[unroll]] for (uint j_ = 0; j_ < CM_BLOCK_WORDS_PER_LANE; ++j_) {                                  \
        const uint w_ = gl_SubgroupInvocationID + j_ * VKF_CM_SUBGROUP_SIZE, r_ = (row0) + w_ / 2;        \
        words_[kb_ * CM_BLOCK_WORDS_PER_LANE + j_] = uvec4(0);                                            \
        if (w_ < CM_BLOCK_WORDS && r_ < (row_end)) {                                                      \
          words_[kb_ * CM_BLOCK_WORDS_PER_LANE + j_] = buffer_u4[VKF_CM_BLOCK_WORD(head_base, stride, r_, kb_, w_)]; \
        }                                                                                                 \
      }                                                                                                   \
    }                                                                                                     \
    [[unroll]] for (uint kb_ = 0; kb_ < D_BLOCKS; ++kb_) {                                                \
      [[unroll]] for (uint j_ = 0; j_ < CM_BLOCK_WORDS_PER_LANE; ++j_) {                                  \
        const uint w_ = gl_SubgroupInvocationID + j_ * VKF_CM_SUBGROUP_SIZE;                              \
        if (w_ < CM_BLOCK_WORDS) cm_block_scratch[CM_BLOCK_SCRATCH + w_] = words_[kb_ * CM_BLOCK_WORDS_PER_LANE + j_]; \
      }                                                                                                   \
      subgroupMemoryBarrierShared();                                                                      \
      subgroupBarrier();                                                                                  \
      cm_load_rows(frags[(first) + kb_], cm_block_scratch, CM_BLOCK_SCRATCH, 2);                          \
      subgroupBarrier();  /* the next block overwrites the scratch */                                     \
    }                                                                                                     \
  }

// Statement: stores accumulators acc[first .. first + D_BLOCKS) as the float16 rows row0 ..
// row0 + 15 of a tensor laid out as above; rows >= row_end are left alone. Through the scratch,
// as VKF_LOAD_ROW_BLOCK. From uniform control flow.
#define VKF_STORE_ROW_BLOCK(acc, first, buffer_u4, head_base, stride, row0, row_end)                      \
  [[unroll]] for (uint db_ = 0; db_ < D_BLOCKS; ++db_) {                                                  \
    cm_store_rows(VKF_ACC16(acc[(first) + db_]), cm_block_scratch, CM_BLOCK_SCRATCH, 2);                  \
    subgroupMemoryBarrierShared();                                                                        \
    subgroupBarrier();                                                                                    \
    [[unroll]] for (uint j_ = 0; j_ < CM_BLOCK_WORDS_PER_LANE; ++j_) {                                    \
      const uint w_ = gl_SubgroupInvocationID + j_ * VKF_CM_SUBGROUP_SIZE, r_ = (row0) + w_ / 2;          \
      if (w_ < CM_BLOCK_WORDS && r_ < (row_end)) {                                                        \
        buffer_u4[VKF_CM_BLOCK_WORD(head_base, stride, r_, db_, w_)] = cm_block_scratch[CM_BLOCK_SCRATCH + w_]; \
      }                                                                                                   \
    }                                                                                                     \
    subgroupBarrier();  /* the next block overwrites the scratch */                                       \
  }

// The same two statements without the scratch: straight from and to memory where all 16 rows
// exist, else element by element (rows >= row_end read as zeros, through an accumulator-layout
// matrix and acc_to_a; left alone when storing). Only the forward at head dims <= 64 still takes
// them (attention_forward_coopmat.comp says why).
#define VKF_LOAD_ROW_BLOCK_DIRECT(frags, first, buffer_u4, buffer_h, coord, head_base, stride, row0, row_end)    \
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

#define VKF_STORE_ROW_BLOCK_DIRECT(acc, first, buffer_u4, buffer_h, coord, head_base, stride, row0, row_end)    \
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
// layout probe found A laid out like the accumulator (NVIDIA's), else through the subgroup's block
// scratch (a store, two subgroup barriers and a load).
VKF_MAT_A acc_to_a(VKF_ACC acc) {
  if (VKF_CM_A_LIKE_ACC) {
    VKF_MAT_A a;
    [[unroll]] for (uint i = 0; i < VKF_CM_ELEMENTS; ++i) a[i] = float16_t(acc[i]);
    return a;
  }
  const VKF_ACC16 half_acc = VKF_ACC16(acc);
  cm_store_rows(half_acc, cm_block_scratch, CM_BLOCK_SCRATCH, 2);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  VKF_MAT_A a;
  cm_load_rows(a, cm_block_scratch, CM_BLOCK_SCRATCH, 2);
  subgroupBarrier();  // the scratch is rewritten by the next call
  return a;
}
#else
// NV matrices have no use: converting the component type is all it takes.
VKF_MAT_A acc_to_a(VKF_ACC acc) { return VKF_MAT_A(acc); }
#endif

#endif
