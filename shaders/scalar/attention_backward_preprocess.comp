// FlashAttention-2 backward, step 1: delta = rowsum(dO * O) per query row (float32 workspace),
// the D of the paper, used by both gradient kernels: dS = P * (dP - delta). With ZERO_DQ_SUMS it
// also zeroes the row's float32 dQ sums, which a dK/dV kernel built with atomic dQ then adds to.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#define VKF_DEFAULT_HEAD_DIM 64
#include "common/attention_preamble.glsl"

#include "scalar/tensor_io.glsl"
#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"

VKF_TENSOR_IN(VKF_BWD_BINDING_O, o_data);
VKF_TENSOR_IN(VKF_BWD_BINDING_DO, do_data);
layout(std430, set = 0, binding = VKF_BWD_BINDING_DELTA) writeonly buffer delta_block { float delta_data[]; };
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ_STATE) writeonly buffer dq_sums_block { float dq_sums[]; };
layout(constant_id = VKF_SPEC_ZERO_DQ_SUMS) const bool ZERO_DQ_SUMS = false;

const uint THREADS_PER_ROW = VKF_PREPROCESS_THREADS_PER_ROW;
#include "scalar/row_reduce.glsl"  // built with VKF_SUBGROUP_OPS = 0: through shared memory

// Dispatch: (ceil(q_len / rows per workgroup), q_heads, batch). THREADS_PER_ROW consecutive
// invocations share a query row, each summing every THREADS_PER_ROW-th column, so that a row's
// loads are contiguous (one invocation per row, reading its whole row alone, used a small part of
// the memory bandwidth: docs/tuning-log.md). Partial sums meet in shared memory (row_sum),
// which every device has; its barriers are in uniform control flow.
void main() {
  const uint rows_per_group = WORKGROUP_SIZE / THREADS_PER_ROW;
  const uint lane = gl_LocalInvocationIndex % THREADS_PER_ROW;
  const uint q_row = gl_WorkGroupID.x * rows_per_group + gl_LocalInvocationIndex / THREADS_PER_ROW;
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const Sequence seq = sequence_of(batch);
  if (gl_WorkGroupID.x * rows_per_group >= seq.q_len) return;  // past this batch entry's queries
  const uint o_base = tensor_base(VKF_TENSOR_O, batch, head, seq.q_row0) + q_row * tensor_row_stride(VKF_TENSOR_O);
  const uint do_base = tensor_base(VKF_TENSOR_DO, batch, head, seq.q_row0) + q_row * tensor_row_stride(VKF_TENSOR_DO);
  const uint sums_base = dq_sum_row(batch, head, q_row) * HEAD_DIM;
  float sum = 0.0;
  if (q_row < seq.q_len) {
    for (uint d = lane; d < HEAD_DIM; d += THREADS_PER_ROW) {
      sum += float(o_data[o_base + d]) * float(do_data[do_base + d]);
      if (ZERO_DQ_SUMS) dq_sums[sums_base + d] = 0.0;
    }
  }
  const float total = row_sum(sum);
  if (lane == 0 && q_row < seq.q_len) delta_data[lse_index(batch, head, seq, q_row)] = total;
}
