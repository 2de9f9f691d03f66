// Merges the split-K parts of decode/attention_forward_decode.comp: one workgroup per (query row,
// head, batch) weighs each split's normalized O by exp2(its LSE - the max LSE), in split order
// (deterministic), and writes O (float16) and the LSE (natural log).
#version 450
#extension GL_GOOGLE_include_directive : require

#define VKF_DEFAULT_HEAD_DIM 128
#include "common/attention_preamble.glsl"
#include "common/constants.glsl"
#define VKF_SEQUENCES_BINDING VKF_FWD_BINDING_SEQUENCES
#include "common/sequences.glsl"
layout(constant_id = VKF_SPEC_WRITE_LSE) const bool WRITE_LSE = true;

layout(std430, set = 0, binding = VKF_FWD_BINDING_O) writeonly buffer o_block { uint o_h2[]; };  // half pairs
layout(std430, set = 0, binding = VKF_FWD_BINDING_LSE) writeonly buffer lse_block { float lse_data[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_O_STATE) readonly buffer o_part_block { vec2 o_part[]; };
layout(std430, set = 0, binding = VKF_FWD_BINDING_ROW_STATE) readonly buffer lse_part_block { float lse_part[]; };

void main() {
  const uint n = gl_WorkGroupID.x, head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const Sequence seq = sequence_of(batch);
  if (n >= seq.q_len) return;  // past this batch entry's queries
  const uint row_index = (batch * pc.q_heads + head) * pc.q_len + n;  // of the parts
  const uint splits = (pc.kv_len + pc.split_keys - 1) / pc.split_keys;
  // The max over the splits (NaN wins: it must reach O and LSE), then the weights' sum.
  float max_lse = NEG_INF;
  for (uint s = 0; s < splits; ++s) {
    const float x = lse_part[row_index * splits + s];
    max_lse = isnan(x) || x > max_lse ? x : max_lse;
  }
  float weight_sum = 0.0;
  for (uint s = 0; s < splits; ++s) {
    const float x = lse_part[row_index * splits + s];
    weight_sum += x == NEG_INF ? 0.0 : exp2(x - max_lse);
  }
  const float inv_sum = weight_sum == 0.0 ? 0.0 : 1.0 / weight_sum;  // a row that saw no key: O = 0
  const uint o_at = (tensor_base(VKF_TENSOR_O, batch, head, seq.q_row0) + n * tensor_row_stride(VKF_TENSOR_O)) / 2;
  for (uint pair = gl_LocalInvocationIndex; pair < HEAD_DIM / 2; pair += WORKGROUP_SIZE) {
    vec2 o = vec2(0.0);
    for (uint s = 0; s < splits; ++s) {
      const float x = lse_part[row_index * splits + s];
      if (x == NEG_INF) continue;  // a split that saw no key of this row (its O is 0)
      o += exp2(x - max_lse) * o_part[(row_index * splits + s) * (HEAD_DIM / 2) + pair];
    }
    o_h2[o_at + pair] = packHalf2x16(o * inv_sum);
  }
  if (WRITE_LSE && gl_LocalInvocationIndex == 0) lse_data[lse_index(batch, head, seq, n)] = (max_lse + log2(weight_sum)) * LN2;
}
