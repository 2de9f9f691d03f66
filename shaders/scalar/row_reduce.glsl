// Reductions over the THREADS_PER_ROW invocations that share one query row. Those invocations
// are consecutive in gl_LocalInvocationIndex and aligned to THREADS_PER_ROW.
//
// VKF_SUBGROUP_OPS = 1: butterfly shuffles inside a subgroup; the engine picks this variant only
// when THREADS_PER_ROW <= the device's smallest subgroup size, the workgroup is a whole number of
// subgroups, and SHUFFLE is supported in compute.
// VKF_SUBGROUP_OPS = 0: through shared memory (two barriers): every device runs it.
//
// Call from uniform control flow only: the shared-memory path has barriers.
#ifndef VKFLASH_ROW_REDUCE_GLSL
#define VKFLASH_ROW_REDUCE_GLSL

#include "common/shared_memory_sizes.h"

#if VKF_SUBGROUP_OPS

float row_max(float x) {
  for (uint mask = THREADS_PER_ROW / 2; mask > 0; mask >>= 1) x = max(x, subgroupShuffleXor(x, mask));
  return x;
}
float row_sum(float x) {
  for (uint mask = THREADS_PER_ROW / 2; mask > 0; mask >>= 1) x += subgroupShuffleXor(x, mask);
  return x;
}

#else

shared float row_reduce_scratch[VKF_SMEM_ROW_REDUCE_FLOATS(WORKGROUP_SIZE)];

float row_max(float x) {
  const uint first = (gl_LocalInvocationIndex / THREADS_PER_ROW) * THREADS_PER_ROW;
  row_reduce_scratch[gl_LocalInvocationIndex] = x;
  barrier();
  float r = row_reduce_scratch[first];
  for (uint i = 1; i < THREADS_PER_ROW; ++i) r = max(r, row_reduce_scratch[first + i]);
  barrier();  // the scratch is reused by the next reduction
  return r;
}
float row_sum(float x) {
  const uint first = (gl_LocalInvocationIndex / THREADS_PER_ROW) * THREADS_PER_ROW;
  row_reduce_scratch[gl_LocalInvocationIndex] = x;
  barrier();
  float r = 0.0;
  for (uint i = 0; i < THREADS_PER_ROW; ++i) r += row_reduce_scratch[first + i];
  barrier();
  return r;
}

#endif
#endif
