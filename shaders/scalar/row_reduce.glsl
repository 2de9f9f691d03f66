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

// a + b = sum + error exactly (Knuth's TwoSum); `precise` keeps the compiler from folding it away.
// For finite a and b; an inf operand makes the error NaN (the forward's row sums are finite or NaN:
// every P is at most 1).
void two_sum(float a, float b, out float sum, out float error) {
  precise float s = a + b;
  precise float b_part = s - a;
  precise float err = (a - (s - b_part)) + (b - b_part);
  sum = s;
  error = err;
}

#if VKF_SUBGROUP_OPS

float row_max(float x) {
  for (uint mask = THREADS_PER_ROW / 2; mask > 0; mask >>= 1) x = max(x, subgroupShuffleXor(x, mask));
  return x;
}
float row_sum(float x) {
  for (uint mask = THREADS_PER_ROW / 2; mask > 0; mask >>= 1) x += subgroupShuffleXor(x, mask);
  return x;
}
// The row's sum of x + e, where each invocation's e is the small correction of its x (a compensated
// sum's): every step adds with two_sum, so that the other invocations' small partial sums keep their
// low bits when they join one large one. Both invocations of a step get the same bits: a sum of two
// is commutative, and TwoSum's error is exact whichever operand comes first.
float row_sum_compensated(float x, float e) {
  for (uint mask = THREADS_PER_ROW / 2; mask > 0; mask >>= 1) {
    float step_error;
    two_sum(x, subgroupShuffleXor(x, mask), x, step_error);
    precise float e_pair = e + subgroupShuffleXor(e, mask);
    e = e_pair + step_error;
  }
  return x + e;
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
float row_sum_compensated(float x, float e) {
  const float e_sum = row_sum(e);  // the corrections are small: a plain sum keeps their bits
  const uint first = (gl_LocalInvocationIndex / THREADS_PER_ROW) * THREADS_PER_ROW;
  row_reduce_scratch[gl_LocalInvocationIndex] = x;
  barrier();
  float r = row_reduce_scratch[first], r_error = 0.0;
  for (uint i = 1; i < THREADS_PER_ROW; ++i) {
    float step_error;
    two_sum(r, row_reduce_scratch[first + i], r, step_error);
    r_error += step_error;
  }
  barrier();
  return r + (r_error + e_sum);
}

#endif
#endif
