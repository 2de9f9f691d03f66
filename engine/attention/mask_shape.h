// The shape of a call's mask / bias (AttentionParams::mask): which of [B, Hq, Nq, Nk] it has and
// how long Nq and Nk are. The shaders' side is score_head / mask_bias_log2 in
// shaders/common/score_mod.glsl (the push constants' mask_q_len / mask_kv_len, VKF_SPEC_MASK_DIMS).
#pragma once

#include <vkflash/vkflash.hpp>

#include <cstdint>

namespace vkflash::attention {

struct MaskShape {
  // The call's sizes of the four dimensions (Nq, Nk: the longest sequence's with cu_seqlens).
  uint32_t batch = 0, heads = 0, q_len = 0, kv_len = 0;
  uint32_t dims = 0;  // VKF_MASK_HAS_* bits: the dimensions the mask has (the others are 1)

  // The mask's own extent of each dimension, and its element count.
  uint32_t mask_batch() const;
  uint32_t mask_heads() const;
  uint32_t mask_rows() const;
  uint32_t mask_keys() const;
  uint64_t elements() const;
};

MaskShape MaskShapeOf(const AttentionParams& params);

}  // namespace vkflash::attention
