// Merges the split-K parts of the decode kernels (decode/attention_forward_decode.comp and
// attention_forward_decode_coopmat2.comp, which write them alike): one workgroup per (query row,
// head, batch) weighs each split's normalized O by exp2(its LSE - the max LSE) and writes O
// (float16) and the LSE (natural log).
//
// The pass is short and latency-bound (a few dozen parts per row), so it is one round of reads
// spread over the workgroup: invocation (quad, lane) merges parts lane, lane + SPLIT_LANES, ... of
// one column quad with its own running max (as the online softmax does), and the lanes are then
// merged in lane order through shared memory. Fixed orders everywhere: deterministic.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#define VKF_DEFAULT_HEAD_DIM 128
#include "common/attention_preamble.glsl"
#include "common/constants.glsl"
#include "common/nonfinite.glsl"
#define VKF_SEQUENCES_BINDING VKF_FWD_BINDING_SEQUENCES
#include "common/sequences.glsl"
layout(constant_id = VKF_SPEC_WRITE_LSE) const bool WRITE_LSE = true;

layout(std430, set = 0, binding = VKF_FWD_BINDING_O) writeonly buffer o_block { uvec2 o_h4[]; };  // half quads
layout(std430, set = 0, binding = VKF_FWD_BINDING_LSE) writeonly buffer lse_block { float lse_data[]; };
#include "decode/split_parts.glsl"
VKF_DECLARE_SPLIT_PARTS(readonly)

const uint QUADS = HEAD_DIM / 4;                   // the engine keeps HEAD_DIM / 4 <= WORKGROUP_SIZE
const uint SPLIT_LANES = WORKGROUP_SIZE / QUADS;   // invocations that share a column quad
// Parts each invocation reads at once: 8 take the 32 parts of issue 21's 16k-key step at D = 128 in
// one round (4 took two: 0.030 against 0.029 ms on the H200; 16 no faster: docs/tuning-log.md).
const uint READS_IN_FLIGHT = 8;
shared float lane_max[WORKGROUP_SIZE], lane_weight[WORKGROUP_SIZE];
shared vec4 lane_o[WORKGROUP_SIZE];

void main() {
  const uint n = gl_WorkGroupID.x, head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const Sequence seq = sequence_of(batch);
  if (n >= seq.q_len) return;  // past this batch entry's queries (uniform: no barrier skipped)
  const uint splits = split_part_count();
  const uint first_part = first_part_of_row(batch, head, n, splits);
  const uint tid = gl_LocalInvocationIndex, quad = tid % QUADS, lane = tid / QUADS;

  // This lane's parts: m the max LSE so far (a NaN wins: it must reach O and the LSE), weight the
  // sum of exp2(LSE - m), o the parts' O so weighed. A part that saw no key of the row (LSE -inf,
  // O 0) adds nothing.
  float m = NEG_INF, weight = 0.0;
  vec4 o = vec4(0.0);
  if (lane < SPLIT_LANES) {
    // READS_IN_FLIGHT parts read at once (the reads are independent; a loop of one read per
    // iteration waited for each), then folded in part order.
    for (uint s0 = lane; s0 < splits; s0 += READS_IN_FLIGHT * SPLIT_LANES) {
      float x[READS_IN_FLIGHT];
      vec4 part[READS_IN_FLIGHT];
      [[unroll]] for (uint u = 0; u < READS_IN_FLIGHT; ++u) {
        const uint s = s0 + u * SPLIT_LANES;
        x[u] = s < splits ? lse_part[first_part + s] : NEG_INF;
        part[u] = s < splits ? o_part[(first_part + s) * QUADS + quad] : vec4(0.0);
      }
      [[unroll]] for (uint u = 0; u < READS_IN_FLIGHT; ++u) {
        if (x[u] == NEG_INF) continue;
        const float new_m = max_keeping_nan(m, x[u]);
        const float rescale = m == NEG_INF ? 0.0 : exp2(m - new_m);
        const float w = exp2(x[u] - new_m);
        weight = weight * rescale + w;
        o = o * rescale + w * part[u];
        m = new_m;
      }
    }
  }
  lane_max[tid] = m;
  lane_weight[tid] = weight;
  lane_o[tid] = o;
  barrier();
  if (lane != 0) return;
  // The lanes of this quad, in lane order.
  float max_lse = m;
  for (uint l = 1; l < SPLIT_LANES; ++l) max_lse = max_keeping_nan(max_lse, lane_max[l * QUADS + quad]);
  float weight_sum = 0.0;
  vec4 o_sum = vec4(0.0);
  for (uint l = 0; l < SPLIT_LANES; ++l) {
    const float lane_m = lane_max[l * QUADS + quad];
    if (lane_m == NEG_INF) continue;
    const float rescale = exp2(lane_m - max_lse);
    weight_sum += lane_weight[l * QUADS + quad] * rescale;
    o_sum += lane_o[l * QUADS + quad] * rescale;
  }
  const float inv_sum = weight_sum == 0.0 ? 0.0 : 1.0 / weight_sum;  // a row that saw no key: O = 0
  o_sum *= inv_sum;
  const uint o_at = (tensor_base(VKF_TENSOR_O, batch, head, seq.q_row0) + n * tensor_row_stride(VKF_TENSOR_O)) / 4;
  o_h4[o_at + quad] = uvec2(packHalf2x16(o_sum.xy), packHalf2x16(o_sum.zw));
  if (WRITE_LSE && quad == 0) lse_data[lse_index(batch, head, seq, n)] = (max_lse + log2(weight_sum)) * LN2;
}
