// Push constants and specialization constants of the attention kernels, built in one place for
// every operator (their meaning: shaders/common/shader_interface.h).
#pragma once

#include <vkflash/vkflash.hpp>

#include <array>
#include <cmath>
#include <cstdint>

#include "attention/coopmat_layout.h"
#include "common/shader_interface.h"

namespace vkflash::attention {

inline gpu::AttentionPush MakeAttentionPush(const AttentionParams& params) {
  gpu::AttentionPush push{};
  push.batch = params.shape.batch;
  push.q_heads = params.shape.q_heads;
  push.kv_heads = params.shape.kv_heads;
  push.q_len = params.shape.q_len;
  push.kv_len = params.shape.kv_len;
  push.scale_log2 = params.effective_scale() * float(M_LOG2E);
  push.chunk_begin = 0;  // unchunked kernels ignore them
  push.chunk_end = UINT32_MAX;
  return push;
}

// Indexed by the VKF_SPEC_* ids.
using SpecConstants = std::array<uint32_t, VKF_SPEC_COUNT>;

inline SpecConstants MakeSpecConstants(const KernelChoice& choice, const AttentionParams& params, bool write_lse,
                                       bool instrument = false, bool chunked = false) {
  SpecConstants spec{};
  spec[VKF_SPEC_WORKGROUP_SIZE] = choice.workgroup_size;
  spec[VKF_SPEC_HEAD_DIM] = params.shape.head_dim;
  spec[VKF_SPEC_BLOCK_Q] = choice.block_q;
  spec[VKF_SPEC_BLOCK_KV] = choice.block_kv;
  spec[VKF_SPEC_THREADS_PER_ROW] = choice.threads_per_row;
  spec[VKF_SPEC_CAUSAL] = params.causal ? 1u : 0u;
  spec[VKF_SPEC_WRITE_LSE] = write_lse ? 1u : 0u;
  spec[VKF_SPEC_INSTRUMENT] = instrument ? 1u : 0u;
  spec[VKF_SPEC_CHUNKED] = chunked ? 1u : 0u;
  return spec;
}

// The tensor-core kernels' extra constants: their subgroup size and the accumulator layout, or
// for the VK_NV_cooperative_matrix2 kernels (kNv2, whose reductions are the driver's) the
// subgroup size and the granularity.
inline void SetCoopmatConstants(const KernelChoice& choice, const CoopmatLayout& layout, SpecConstants* spec) {
  if (choice.cooperative_matrix == CooperativeMatrixApi::kNone) return;
  (*spec)[VKF_SPEC_SUBGROUP_SIZE] = choice.subgroup_size;
  if (choice.cooperative_matrix == CooperativeMatrixApi::kNv2) {
    (*spec)[VKF_SPEC_CM2_STAT_COLUMNS] = choice.matrix_granularity;
    return;
  }
  (*spec)[VKF_SPEC_CM_ROWS_PER_LANE] = layout.rows_per_lane;
  (*spec)[VKF_SPEC_CM_SLOTS_LO] = layout.slots_lo;
  (*spec)[VKF_SPEC_CM_SLOTS_HI] = layout.slots_hi;
  (*spec)[VKF_SPEC_CM_ROW_LANE_MASK] = layout.row_lane_mask;
}

}  // namespace vkflash::attention
