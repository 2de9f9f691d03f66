// The sinks' gradient (docs/design.md): dsinks[h] = -sum over batch entries b and their query rows
// i of P_sink * delta, where P_sink = exp(sink[h] - LSE[b, h, i]) and delta = rowsum(dO * O) (the
// preprocess's). One workgroup per query head: each invocation sums a fixed set of rows in a fixed
// order, and the workgroup adds the partial sums in a fixed tree, so the bits never vary.
// Dispatch: (1, q_heads, 1), after the preprocess.
#version 450
#extension GL_GOOGLE_include_directive : require

#define VKF_DEFAULT_HEAD_DIM 64
#include "common/attention_preamble.glsl"
#include "common/constants.glsl"
#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"

layout(std430, set = 0, binding = VKF_BWD_BINDING_LSE) readonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) readonly buffer delta_block { float delta_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_SINKS) readonly buffer sinks_block { float sink_logits[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DSINKS) writeonly buffer dsinks_block { float dsinks[]; };

shared float partial_sums[WORKGROUP_SIZE];

void main() {
  const uint head = gl_WorkGroupID.y, lane = gl_LocalInvocationIndex;
  const float sink = sink_logits[head];
  float sum = 0.0;
  for (uint batch = 0; batch < pc.batch; ++batch) {
    const Sequence seq = sequence_of(batch);
    for (uint row = lane; row < seq.q_len; row += WORKGROUP_SIZE) {
      const uint at = lse_index(batch, head, seq, row);
      // a sink of -inf weighs nothing (and its LSE may be -inf too: no NaN from -inf - -inf)
      if (sink != NEG_INF) sum += exp(sink - lse_data[at]) * delta_data[at];
    }
  }
  partial_sums[lane] = sum;
  barrier();
  // WORKGROUP_SIZE is a power of two (the preprocess's choice)
  for (uint width = WORKGROUP_SIZE / 2; width > 0; width /= 2) {
    if (lane < width) partial_sums[lane] += partial_sums[lane + width];
    barrier();
  }
  if (lane == 0) dsinks[head] = 0.0 - partial_sums[0];  // no rows: +0, not -0
}
