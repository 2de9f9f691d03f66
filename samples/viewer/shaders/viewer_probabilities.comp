// The attention matrix of one (batch, head) for display: exp(S - rowmax(S)) in [0, 1] (each row's
// strongest key is 1), -1 where the causal mask hides the key. One invocation per query row.
#version 450
#extension GL_GOOGLE_include_directive : require
#if VIEWER_F16
#extension GL_EXT_shader_16bit_storage : require
#define storage_t float16_t
#else
#define storage_t float
#endif
#include "viewer_interface.h"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer QBlock { storage_t q_data[]; };
layout(std430, binding = 1) readonly buffer KBlock { storage_t k_data[]; };
layout(std430, binding = 2) writeonly buffer PBlock { float p_data[]; };
layout(push_constant) uniform Push { ProbabilitiesPush pc; };

float score(uint q_base, uint k_base) {
  float s = 0.0;
  for (uint d = 0; d < pc.head_dim; ++d) s += float(q_data[q_base + d]) * float(k_data[k_base + d]);
  return s * pc.scale;
}

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= pc.q_len) return;
  const uint kv_head = pc.head / (pc.q_heads / pc.kv_heads);
  const uint q_base = ((pc.batch * pc.q_heads + pc.head) * pc.q_len + i) * pc.head_dim;
  const uint k_head = (pc.batch * pc.kv_heads + kv_head) * pc.kv_len;
  const int last = pc.causal != 0u ? int(i) + int(pc.kv_len) - int(pc.q_len) : int(pc.kv_len) - 1;
  float row_max = -3.0e38;
  for (int j = 0; j <= min(last, int(pc.kv_len) - 1); ++j) row_max = max(row_max, score(q_base, (k_head + j) * pc.head_dim));
  for (uint j = 0; j < pc.kv_len; ++j) {
    p_data[i * pc.kv_len + j] = int(j) <= last ? exp(score(q_base, (k_head + j) * pc.head_dim) - row_max) : -1.0;
  }
}
