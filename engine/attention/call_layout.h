// Where one call's rows are: each tensor's strides and the per-batch sequences (lengths and first
// rows), resolved from AttentionParams and checked once, for every operator and kernel family.
// The kernels read the result from the push constants and the sequence table
// (common/shader_interface.h, shaders/common/sequences.glsl).
#pragma once

#include <vkflash/device_info.hpp>

#include <array>
#include <cstdint>
#include <vector>

#include "attention/mask_shape.h"
#include "common/shader_interface.h"

namespace vkflash::attention {

struct CallLayout {
  // The params the kernels are planned with (tiles, grids, chunks, split-K, workspace parts):
  // without sequences the call's own; with them, q_len and kv_len are the longest sequence's
  // (kv_len: the most keys one attends to, or for the backward the most key rows one owns).
  AttentionParams planning;
  // Element strides per VKF_TENSOR_* (batch, head, row), as the push constants hold them.
  std::array<std::array<uint32_t, 3>, VKF_TENSOR_COUNT> strides{};
  // Bytes each tensor's view must hold (VKF_TENSOR_*; the LSE in floats).
  std::array<uint64_t, VKF_TENSOR_COUNT> required_bytes{};
  // Whether every stride of Q, K, V, O, dO is a multiple of 8 elements: the tensor-core and decode
  // kernels move 16-byte vectors.
  bool vector_strides = true;
  // The sequence table (VKF_SEQUENCE_UINTS per batch entry), empty when the sequences are uniform.
  std::vector<uint32_t> sequence_table;
  // Whether the tensors are the packed [B, H, N, D] of the shape, with uniform sequences.
  bool packed = true;
  // The mask's shape (from the call's own params: planning's lengths differ with sequences).
  MaskShape mask;
  // Whether every sequence has planning.shape.q_len query rows, or none (cu_seqlens_q may differ).
  bool uniform_q_len = true;

  uint64_t sequence_table_bytes() const { return sequence_table.size() * sizeof(uint32_t); }
};

// Checks the strides (rows that overlap, strides past 32 bits), the lengths and offsets (counts
// that do not match the batch, decreasing offsets, lengths past what the tensors hold) and
// resolves them. `backward`: plan kv_len for the dK/dV kernels (the key rows each sequence owns).
Result<CallLayout> ResolveCallLayout(const AttentionParams& params, bool backward);

// The push constants of a call: shape, scale, strides, sequences (common/shader_interface.h).
gpu::AttentionPush MakeAttentionPush(const CallLayout& call);

// Records the writes of the call's sequence table into `part` (of the workspace), between
// barriers: earlier compute work on the workspace completes first, and the kernels after it see
// the table.
void RecordSequenceTable(VkCommandBuffer cmd, const CallLayout& call, const BufferView& part);

}  // namespace vkflash::attention
