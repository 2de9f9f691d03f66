// GLSL extensions that a kernel variant needs. Included right after #version: extensions must
// precede every declaration. Each variant only declares the capabilities it uses, so that a
// device without (say) subgroup shuffles can still create the other variants' pipelines.
// [[dont_unroll]] on the long inner loops: fully unrolled, they cost lavapipe (and other JIT
// drivers) 5-7x the pipeline compile time for no measured speed.
#extension GL_EXT_control_flow_attributes : require
#ifndef VKF_FLOAT16_MATH
#define VKF_FLOAT16_MATH 0  // float16 products: the register-tiled forward's _f16math variants only
#endif
#ifndef VKF_FLOAT_K_TILE
#define VKF_FLOAT_K_TILE 0  // K staged as floats beside float16 math: the _f16math_kf32 variants only
#endif
#if VKF_FLOAT_K_TILE && !VKF_FLOAT16_MATH
#error "K is staged as floats by every variant without float16 math already"
#endif
#if VKF_STORAGE_F16
#extension GL_EXT_shader_16bit_storage : require
#endif
#if VKF_FLOAT16_MATH
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require  // workgroup-scope shared-memory atomics
#endif
#if VKF_SUBGROUP_OPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
