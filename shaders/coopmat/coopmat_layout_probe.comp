// Reveals how the device spreads a 16 x 16 float32 accumulator over a subgroup's lanes: one
// subgroup loads the matrix whose element (r, c) is 16 r + c and writes out what each lane holds
// (layout of the output: VKF_PROBE_* in common/shader_interface.h); then the same for a float16 A
// operand. The engine checks the structure the attention kernels rely on and derives their
// VKF_CM_* constants from it.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "coopmat/coopmat_extensions.glsl"
#include "common/shader_interface.h"
#include "common/shared_memory_sizes.h"
#include "coopmat/coopmat_constants.glsl"
#include "coopmat/coopmat.glsl"

layout(local_size_x_id = VKF_SPEC_SUBGROUP_SIZE) in;
layout(std430, set = 0, binding = VKF_PROBE_BINDING_OUT) writeonly buffer out_block { float probe_out[]; };

shared float coord_values[VKF_SMEM_CM_COORD_FLOATS];
shared float16_t coord_halves[VKF_SMEM_CM_COORD_FLOATS];  // 0 .. 255 are exact in float16

void main() {
  const uint lane = gl_LocalInvocationIndex;
  for (uint i = lane; i < 256; i += VKF_CM_SUBGROUP_SIZE) {
    coord_values[i] = float(i);
    coord_halves[i] = float16_t(i);
  }
  barrier();
  VKF_ACC coord;
  cm_load_rows(coord, coord_values, 0, 16);
  const uint count = coord.length();
  for (uint i = 0; i < count && i < VKF_PROBE_STRIDE - 1; ++i) probe_out[lane * VKF_PROBE_STRIDE + i] = coord[i];
  probe_out[lane * VKF_PROBE_STRIDE + VKF_PROBE_STRIDE - 1] = float(count);

  VKF_MAT_A coord_a;
  cm_load_rows(coord_a, coord_halves, 0, 16);
  const uint a_count = coord_a.length();
  const uint a_at = (VKF_CM_SUBGROUP_SIZE + lane) * VKF_PROBE_STRIDE;
  for (uint i = 0; i < a_count && i < VKF_PROBE_STRIDE - 1; ++i) probe_out[a_at + i] = float(coord_a[i]);
  probe_out[a_at + VKF_PROBE_STRIDE - 1] = float(a_count);
}
