// Where a workgroup's rows are: its batch entry's sequence (lengths and first memory rows, from the
// sequence table or the push constants) and the tensors' strides (common/shader_interface.h).
// Include after common/attention_preamble.glsl, with VKF_SEQUENCES_BINDING defined as the kernel's
// VKF_FWD_BINDING_SEQUENCES or VKF_BWD_BINDING_SEQUENCES.
#ifndef VKFLASH_SEQUENCES_GLSL
#define VKFLASH_SEQUENCES_GLSL

layout(std430, set = 0, binding = VKF_SEQUENCES_BINDING) readonly buffer sequences_block { uint sequence_data[]; };

struct Sequence {
  uint q_row0;   // memory row of query 0 (Q, O, dO, dQ and the LSE)
  uint q_len;    // its query rows
  uint kv_row0;  // memory row of key 0 (K, V, dK, dV)
  uint kv_len;   // the keys it attends to
  uint kv_rows;  // the key rows it owns: dK and dV rows [kv_len, kv_rows) are written as zeros
};

Sequence sequence_of(uint batch) {
  if (pc.sequence_table == 0) return Sequence(0, pc.q_len, 0, pc.kv_len, pc.kv_len);
  const uint at = batch * VKF_SEQUENCE_UINTS;
  return Sequence(sequence_data[at + VKF_SEQUENCE_Q_ROW0], sequence_data[at + VKF_SEQUENCE_Q_LEN],
                  sequence_data[at + VKF_SEQUENCE_KV_ROW0], sequence_data[at + VKF_SEQUENCE_KV_LEN],
                  sequence_data[at + VKF_SEQUENCE_KV_ROWS]);
}

// Element offset of memory row `row0` of (batch, head) in tensor t (VKF_TENSOR_*): the row of a
// sequence's first query or key. Row n of the sequence starts tensor_row_stride(t) * n later.
uint tensor_base(uint t, uint batch, uint head, uint row0) {
  return batch * pc.strides[3 * t] + head * pc.strides[3 * t + 1] + row0 * pc.strides[3 * t + 2];
}
uint tensor_row_stride(uint t) { return pc.strides[3 * t + 2]; }

// Index of query row n of (batch, head) in the LSE (and the backward's delta).
uint lse_index(uint batch, uint head, Sequence seq, uint n) {
  return tensor_base(VKF_TENSOR_LSE, batch, head, seq.q_row0) + n;
}

// Index of query row n of (batch, head) among the rows of the backward's float32 dQ sums in the
// workspace (the chunked scalar dQ kernel's state, atomic dQ): [batch, q_heads, q_len, HEAD_DIM]
// for the longest sequence (pc.q_len); times HEAD_DIM, the row's first element.
uint dq_sum_row(uint batch, uint head, uint n) { return (batch * pc.q_heads + head) * pc.q_len + n; }

#endif
