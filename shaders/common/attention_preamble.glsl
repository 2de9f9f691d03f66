// What every attention kernel (forward, backward preprocess, dK/dV, dQ; every family) declares the
// same way: the workgroup size, the specialization constants they share (ids: common/
// shader_interface.h), the push constants, and WORKGROUP_SIZE. Include after the #extension lines.
//
// The kernel first defines the defaults of its constants (the engine sets them all; the defaults
// only make the SPIR-V valid on its own, and differ between kernels):
//   VKF_DEFAULT_HEAD_DIM                        every kernel;
//   VKF_DEFAULT_BLOCK_Q, VKF_DEFAULT_BLOCK_KV   kernels with query and key tiles, which also get
//                                               WINDOW_LEFT / WINDOW_RIGHT (the preprocess has
//                                               none of them);
//   VKF_DEFAULT_THREADS_PER_ROW                 the scalar tile kernels.
// Constants of one kind of kernel only (WRITE_LSE, CHUNKED, INSTRUMENT, ...) stay in the kernel.
#ifndef VKFLASH_ATTENTION_PREAMBLE_GLSL
#define VKFLASH_ATTENTION_PREAMBLE_GLSL

#include "common/shader_interface.h"

layout(local_size_x_id = VKF_SPEC_WORKGROUP_SIZE) in;
layout(constant_id = VKF_SPEC_HEAD_DIM) const uint HEAD_DIM = VKF_DEFAULT_HEAD_DIM;
#ifdef VKF_DEFAULT_BLOCK_Q
layout(constant_id = VKF_SPEC_BLOCK_Q) const uint BLOCK_Q = VKF_DEFAULT_BLOCK_Q;
layout(constant_id = VKF_SPEC_BLOCK_KV) const uint BLOCK_KV = VKF_DEFAULT_BLOCK_KV;
#ifdef VKF_DEFAULT_THREADS_PER_ROW
layout(constant_id = VKF_SPEC_THREADS_PER_ROW) const uint THREADS_PER_ROW = VKF_DEFAULT_THREADS_PER_ROW;
#endif
layout(constant_id = VKF_SPEC_WINDOW_LEFT) const bool WINDOW_LEFT = false;
layout(constant_id = VKF_SPEC_WINDOW_RIGHT) const bool WINDOW_RIGHT = false;  // causal too
#endif

layout(push_constant) uniform PushBlock { AttentionPush pc; };

const uint WORKGROUP_SIZE = gl_WorkGroupSize.x;

#endif
