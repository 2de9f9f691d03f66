// FlashAttention-2 backward, step 1: delta = rowsum(dO * O) per query row (float32 workspace),
// the D of the paper, used by both gradient kernels: dS = P * (dP - delta).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common/variant_extensions.glsl"

#include "common/shader_interface.h"

layout(local_size_x_id = VKF_SPEC_WORKGROUP_SIZE) in;
layout(constant_id = VKF_SPEC_HEAD_DIM) const uint HEAD_DIM = 64;

#include "common/tensor_io.glsl"

VKF_TENSOR_IN(VKF_BWD_BINDING_O, o_data);
VKF_TENSOR_IN(VKF_BWD_BINDING_DO, do_data);
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) writeonly buffer delta_block { float delta_data[]; };

layout(push_constant) uniform PushBlock { AttentionPush pc; };

// Dispatch: (ceil(q_len / WORKGROUP_SIZE), q_heads, batch); one invocation per query row.
void main() {
  const uint q_row = gl_GlobalInvocationID.x;
  if (q_row >= pc.q_len) return;  // no barriers in this kernel: early return is fine
  const uint row_index = (gl_WorkGroupID.z * pc.q_heads + gl_WorkGroupID.y) * pc.q_len + q_row;
  const uint base = row_index * HEAD_DIM;
  float sum = 0.0;
  [[dont_unroll]] for (uint d = 0; d < HEAD_DIM; ++d) sum += float(o_data[base + d]) * float(do_data[base + d]);
  delta_data[row_index] = sum;
}
