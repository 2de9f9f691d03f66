// The naive baseline: three passes through an Nq x Nk scores buffer, the way attention is written
// without FlashAttention (O(N^2) memory traffic). PASS (spec constant): 0 = S = scale Q K^T (with
// the causal mask and the window), 1 = softmax of each row in place, 2 = O = P V. Benchmarks compare against it;
// tests use it as a second GPU reference. One (batch, head) per dispatch.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#include "common/shader_interface.h"

layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = VKF_SPEC_WINDOW_LEFT) const bool WINDOW_LEFT = false;
layout(constant_id = VKF_SPEC_WINDOW_RIGHT) const bool WINDOW_RIGHT = false;  // causal too
layout(constant_id = VKF_SPEC_NAIVE_PASS) const uint PASS = 0;

#include "scalar/tensor_io.glsl"
#include "scalar/naive_common.glsl"
#include "common/attention_mask.glsl"

void main() {
  const uint x = gl_GlobalInvocationID.x, y = gl_GlobalInvocationID.y;
  const uint q_len = pc.q_len, kv_len = pc.kv_len;
  if (PASS == 0u) {  // S: x = key, y = query
    if (x >= kv_len || y >= q_len) return;
    float s = 0.0;
    for (uint d = 0; d < pc.head_dim; ++d) s += float(q_data[q_row_base(y) + d]) * float(k_data[kv_row_base(x) + d]);
    scores[y * kv_len + x] = key_visible(y, x, q_len, kv_len) ? s * pc.scale_log2 * LN2 : NEG_INF;
  } else if (PASS == 1u) {  // softmax: one invocation per row, rows numbered across the 16 x 16 workgroups
    const uint row = gl_WorkGroupID.x * 256u + gl_LocalInvocationIndex;
    if (row >= q_len) return;
    float m = NEG_INF;
    for (uint j = 0; j < kv_len; ++j) m = max(m, scores[row * kv_len + j]);
    float l = 0.0;
    for (uint j = 0; j < kv_len; ++j) l += m == NEG_INF ? 0.0 : exp(scores[row * kv_len + j] - m);
    for (uint j = 0; j < kv_len; ++j) {
      scores[row * kv_len + j] = l > 0.0 ? exp(scores[row * kv_len + j] - m) / l : 0.0;
    }
  } else {  // O: x = column d, y = query
    if (x >= pc.head_dim || y >= q_len) return;
    float o = 0.0;
    for (uint j = 0; j < kv_len; ++j) o += scores[y * kv_len + j] * float(v_data[kv_row_base(j) + x]);
    o_data[q_row_base(y) + x] = storage_t(o);
  }
}
