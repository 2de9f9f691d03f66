// FlashAttention-2 backward with atomic dQ (deterministic = false), last step: dQ = scale x the
// float32 sums that the dK/dV kernel added up with atomics (zeroed by the preprocess), in the
// tensors' storage type and Q's strides. Dispatched as the preprocess is.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "scalar/variant_extensions.glsl"

#define VKF_DEFAULT_HEAD_DIM 64
#include "common/attention_preamble.glsl"

#include "scalar/tensor_io.glsl"
#define VKF_SEQUENCES_BINDING VKF_BWD_BINDING_SEQUENCES
#include "common/sequences.glsl"

VKF_TENSOR_OUT(VKF_BWD_BINDING_DQ, dq_data);
layout(std430, set = 0, binding = VKF_BWD_BINDING_DQ_STATE) readonly buffer dq_sums_block { float dq_sums[]; };

const uint THREADS_PER_ROW = VKF_PREPROCESS_THREADS_PER_ROW;

// Dispatch: (ceil(q_len / rows per workgroup), q_heads, batch); THREADS_PER_ROW consecutive
// invocations share a query row, each taking every THREADS_PER_ROW-th column.
void main() {
  const uint rows_per_group = WORKGROUP_SIZE / THREADS_PER_ROW;
  const uint lane = gl_LocalInvocationIndex % THREADS_PER_ROW;
  const uint q_row = gl_WorkGroupID.x * rows_per_group + gl_LocalInvocationIndex / THREADS_PER_ROW;
  const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;
  const Sequence seq = sequence_of(batch);
  if (q_row >= seq.q_len) return;
  const uint dq_base = tensor_base(VKF_TENSOR_Q, batch, head, seq.q_row0) + q_row * tensor_row_stride(VKF_TENSOR_Q);
  const uint sums_base = dq_sum_row(batch, head, q_row) * HEAD_DIM;
  const float scale = pc.scale_log2 / LOG2E;
  for (uint d = lane; d < HEAD_DIM; d += THREADS_PER_ROW) dq_data[dq_base + d] = storage_t(dq_sums[sums_base + d] * scale);
}
