// Storage element type of the attention tensors. Compiled twice: VKF_STORAGE_F16 = 0 (float32)
// or 1 (float16, needs storageBuffer16BitAccess). Arithmetic is always float32.
// The extensions a variant needs are in variant_extensions.glsl (they must precede declarations).
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

#define NEG_INF uintBitsToFloat(0xff800000u)
const float LN2 = 0.6931471805599453;

#endif
