// The mask / bias as stored (docs/design.md): its element type and dimensions (specialization
// constants), its words, one element's value, and the geometry of its block summary
// (common/shader_interface.h, VKF_MASK_TILE_*). Shared by the score modifier
// (common/score_mod.glsl) and the summary's kernel (scalar/attention_mask_tiles.comp). Define
// VKF_MASK_ELEMENTS_BINDING (the mask's binding) before including.
#ifndef VKFLASH_MASK_ELEMENTS_GLSL
#define VKFLASH_MASK_ELEMENTS_GLSL

#include "common/constants.glsl"

layout(constant_id = VKF_SPEC_MASK) const uint MASK = VKF_MASK_NONE;
layout(constant_id = VKF_SPEC_MASK_DIMS) const uint MASK_DIMS = 15u;  // VKF_MASK_HAS_* bits

// Read as words whatever the element type: no 8- or 16-bit storage needed.
layout(std430, set = 0, binding = VKF_MASK_ELEMENTS_BINDING) readonly buffer mask_block { uint mask_words[]; };

// Element `at` of the mask, in natural units: the bias; a boolean mask's 0 where it allows the
// pair, -inf where it blocks it.
float mask_value(const uint at) {
  if (MASK == VKF_MASK_FLOAT32) return uintBitsToFloat(mask_words[at]);
  if (MASK == VKF_MASK_FLOAT16) return unpackHalf2x16(mask_words[at >> 1])[at & 1u];
  if (MASK == VKF_MASK_BOOL) return ((mask_words[at >> 2] >> (8u * (at & 3u))) & 0xffu) != 0 ? 0.0 : NEG_INF;
  return 0.0;
}

// The mask's own extents of rows and keys, given the call's (1 along a dimension it broadcasts).
uint mask_stored_rows(uint q_len) { return (MASK_DIMS & VKF_MASK_HAS_ROWS) != 0 ? q_len : 1u; }
uint mask_stored_keys(uint kv_len) { return (MASK_DIMS & VKF_MASK_HAS_KEYS) != 0 ? kv_len : 1u; }

// The block summary of one head of the mask: block rows, and uints per block row.
uint mask_tile_rows(uint stored_rows) { return (stored_rows + VKF_MASK_TILE_ROWS - 1) / VKF_MASK_TILE_ROWS; }
uint mask_tile_words(uint stored_keys) {
  return ((stored_keys + VKF_MASK_TILE_KEYS - 1) / VKF_MASK_TILE_KEYS + 31) / 32;
}

#endif
