// Storage element type of the attention tensors. Compiled twice: VKF_STORAGE_F16 = 0 (float32)
// or 1 (float16, needs storageBuffer16BitAccess). Arithmetic is always float32.
// The extensions a variant needs are in scalar/variant_extensions.glsl (they must precede declarations).
#ifndef VKFLASH_TENSOR_IO_GLSL
#define VKFLASH_TENSOR_IO_GLSL

#if VKF_STORAGE_F16
#define storage_t float16_t
#else
#define storage_t float
#endif

// Declares a read-only / write-only tensor buffer `name` of storage_t at `binding`.
#define VKF_TENSOR_IN(binding_index, name) \
  layout(std430, set = 0, binding = binding_index) readonly buffer name##_block { storage_t name[]; }
#define VKF_TENSOR_OUT(binding_index, name) \
  layout(std430, set = 0, binding = binding_index) writeonly buffer name##_block { storage_t name[]; }

#include "common/constants.glsl"  // NEG_INF, LN2, LOG2E

// Defines `vec4 fn(uint row_base, uint d4)`: elements 4*d4 .. 4*d4+3 of the row that starts at
// element row_base of `buffer`, as floats; columns past HEAD_DIM read as 0 (the shared tiles pad
// the head dim to a multiple of 4).
#define VKF_DEFINE_VEC4_LOADER(fn, buffer)                                    \
  vec4 fn(uint row_base, uint d4) {                                           \
    vec4 x = vec4(0.0);                                                       \
    for (uint j = 0; j < 4; ++j)                                              \
      if (4 * d4 + j < HEAD_DIM) x[j] = float(buffer[row_base + 4 * d4 + j]); \
    return x;                                                                 \
  }

// Defines `void fn(uint row_base, uint d4, vec4 x)`, the store matching VKF_DEFINE_VEC4_LOADER.
#define VKF_DEFINE_VEC4_STORER(fn, buffer)                                      \
  void fn(uint row_base, uint d4, vec4 x) {                                     \
    for (uint j = 0; j < 4; ++j)                                                \
      if (4 * d4 + j < HEAD_DIM) buffer[row_base + 4 * d4 + j] = storage_t(x[j]); \
  }

// Defines `vec4 load_fn(uint row_base, uint d4)` and `void store_fn(uint row_base, uint d4, vec4 x)`
// on the float32 array `buffer`, laid out as the tensors are (columns past HEAD_DIM are neither
// read nor written): the chunked kernels' sums between dispatches.
#define VKF_DEFINE_STATE_ACCESS(load_fn, store_fn, buffer)                   \
  vec4 load_fn(uint row_base, uint d4) {                                     \
    vec4 x = vec4(0.0);                                                      \
    for (uint j = 0; j < 4; ++j)                                             \
      if (4 * d4 + j < HEAD_DIM) x[j] = buffer[row_base + 4 * d4 + j];       \
    return x;                                                                \
  }                                                                          \
  void store_fn(uint row_base, uint d4, vec4 x) {                            \
    for (uint j = 0; j < 4; ++j)                                             \
      if (4 * d4 + j < HEAD_DIM) buffer[row_base + 4 * d4 + j] = x[j];       \
  }

#endif
