// Push constants and specialization constants of the attention kernels, built in one place for
// every operator (their meaning: shaders/common/shader_interface.h).
#pragma once

#include <vkflash/device_info.hpp>

#include <array>
#include <cmath>
#include <cstdint>

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
  push.split_keys = UINT32_MAX;  // one split-K part
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

}  // namespace vkflash::attention
