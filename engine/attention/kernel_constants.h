// Push constants and specialization constants of the attention kernels, built in one place for
// every operator (their meaning: shaders/common/shader_interface.h).
#pragma once

#include <vkflash/device_info.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention/key_band.h"
#include "attention/mask_shape.h"
#include "common/shader_interface.h"

namespace vkflash::attention {

// Indexed by the VKF_SPEC_* ids.
using SpecConstants = std::array<uint32_t, VKF_SPEC_COUNT>;

// How a decode kernel reads a mask: by its block summary or by its elements
// (VKF_SPEC_MASK_SUMMARY), and then for how many of its packed rows (VKF_SPEC_MASK_TERM_ROWS). The
// defaults stand for every other kernel.
struct DecodeMaskReads {
  bool summary = true;
  uint32_t term_rows = 1;
};

inline SpecConstants MakeSpecConstants(const KernelChoice& choice, const AttentionParams& params, bool write_lse,
                                       bool instrument = false, bool chunked = false,
                                       DecodeMaskReads mask_reads = {}) {
  SpecConstants spec{};
  spec[VKF_SPEC_WORKGROUP_SIZE] = choice.workgroup_size;
  spec[VKF_SPEC_HEAD_DIM] = params.shape.head_dim;
  spec[VKF_SPEC_BLOCK_Q] = choice.block_q;
  spec[VKF_SPEC_BLOCK_KV] = choice.block_kv;
  spec[VKF_SPEC_THREADS_PER_ROW] = choice.threads_per_row;
  const KeyBand band = KeyBandOf(params);
  spec[VKF_SPEC_WINDOW_LEFT] = band.bounded_left() ? 1u : 0u;
  spec[VKF_SPEC_WINDOW_RIGHT] = band.bounded_right() ? 1u : 0u;
  // The score modifiers (shaders/common/score_mod.glsl); the softcap as a float's bits.
  std::memcpy(&spec[VKF_SPEC_SOFTCAP], &params.softcap, sizeof(float));
  spec[VKF_SPEC_ALIBI] = uint32_t(params.alibi);
  spec[VKF_SPEC_SINKS] = params.sinks ? 1u : 0u;
  spec[VKF_SPEC_MASK] = uint32_t(params.mask.type);
  spec[VKF_SPEC_MASK_DIMS] = MaskShapeOf(params).dims;
  spec[VKF_SPEC_WRITE_LSE] = write_lse ? 1u : 0u;
  spec[VKF_SPEC_INSTRUMENT] = instrument ? 1u : 0u;
  spec[VKF_SPEC_CHUNKED] = chunked ? 1u : 0u;
  spec[VKF_SPEC_MASK_SUMMARY] = mask_reads.summary ? 1u : 0u;
  spec[VKF_SPEC_MASK_TERM_ROWS] = mask_reads.term_rows;
  return spec;
}

}  // namespace vkflash::attention
