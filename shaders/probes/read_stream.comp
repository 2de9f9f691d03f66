// The device's read bandwidth over given bytes: the ceiling of a decode step, which must read K and
// V once. Every invocation XORs the 16-byte words i, i + N, i + 2N, ... (N invocations in all) of the
// source, four loads in flight; the workgroup folds its values in shared memory (a tree, no atomics)
// and writes them to its own 16 bytes of the sink, so the reads cannot be optimized away and a test
// can check them.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"

layout(local_size_x_id = VKF_SPEC_WORKGROUP_SIZE) in;
layout(push_constant) uniform PushBlock { ReadStreamPush pc; };
layout(std430, set = 0, binding = VKF_READ_STREAM_BINDING_SOURCE) readonly buffer source_block { uvec4 words[]; };
layout(std430, set = 0, binding = VKF_READ_STREAM_BINDING_SINK) writeonly buffer sink_block { uvec4 sink[]; };

shared uvec4 folded[gl_WorkGroupSize.x];  // the workgroup size is a power of two

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uvec4 acc = uvec4(0);
  uint i = gl_GlobalInvocationID.x;
  for (; i + 3 * stride < pc.words; i += 4 * stride) {
    const uvec4 a = words[i], b = words[i + stride], c = words[i + 2 * stride], d = words[i + 3 * stride];
    acc ^= a ^ b ^ c ^ d;
  }
  for (; i < pc.words; i += stride) acc ^= words[i];
  folded[gl_LocalInvocationIndex] = acc;
  barrier();
  for (uint half_size = gl_WorkGroupSize.x / 2; half_size > 0; half_size /= 2) {
    if (gl_LocalInvocationIndex < half_size) folded[gl_LocalInvocationIndex] ^= folded[gl_LocalInvocationIndex + half_size];
    barrier();
  }
  if (gl_LocalInvocationIndex == 0) sink[gl_WorkGroupID.x] = folded[0];
}
