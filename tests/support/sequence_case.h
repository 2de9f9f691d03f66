// Calls whose tensors are laid out as engines hold them (strides, [B, N, H, D], slices of a larger
// buffer) over batches whose sequences differ (docs/design.md, "Sequences": a KV cache's lengths,
// ragged queries or keys), checked sequence by sequence against the float64 reference of that
// sequence alone. Buffers hold NaN wherever no sequence has a row (gaps between strided rows,
// unused cache rows, past the last offset): a kernel that reads there gives NaN, one that writes
// there changes the poison.
#pragma once

#include <vkflash/vkflash.hpp>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "support/attention_case.h"

namespace vkflash::testing {

// Where one tensor's rows are in its host array (the rules the API documents).
struct Placement {
  TensorStrides strides;
  bool ragged = false;
  uint64_t offset = 0;    // elements before the tensor (the view's offset)
  uint64_t elements = 0;  // the host array's size

  uint64_t At(uint32_t b, uint32_t h, uint32_t memory_row) const {
    return offset + (ragged ? 0 : b * strides.batch) + h * strides.head + uint64_t(memory_row) * strides.row;
  }
};
// A Q-side (`key_tensor` false: Q, O, dO) or K-side tensor of `params`, `given` strides or the
// packed ones of params.layout, `offset` elements into its buffer.
Placement Place(const AttentionParams& params, const std::optional<TensorStrides>& given, bool key_tensor,
                uint64_t offset);

// Per sequence: its first memory row and row count in a tensor.
using SequenceRows = std::vector<std::pair<uint32_t, uint32_t>>;
SequenceRows QueryRows(const std::vector<Sequence>& seqs);     // Q, O, dO, dQ
SequenceRows UsedKeyRows(const std::vector<Sequence>& seqs);   // the keys each attends to
SequenceRows OwnedKeyRows(const std::vector<Sequence>& seqs);  // its rows of K and V, used or not

// Copies each sequence's values (packed [heads, rows, D]) into `host` at its rows.
void Scatter(const AttentionParams& params, const Placement& t, uint32_t heads,
             const std::vector<std::vector<float>>& values, const SequenceRows& rows, std::vector<float>* host);
// Each sequence's rows of `host`, packed [heads, rows, D].
std::vector<std::vector<float>> Gather(const AttentionParams& params, const Placement& t, uint32_t heads,
                                       const std::vector<float>& host, const SequenceRows& rows);

// A device buffer holding `host` (packed in `dtype`), and a view from `offset_elements` on.
struct DeviceTensor {
  Buffer buffer;
  BufferView view;
};
DeviceTensor UploadTensor(Context& context, const std::vector<float>& host, DataType dtype, uint64_t offset_elements);
// The whole buffer, from element 0.
std::vector<float> DownloadTensor(Context& context, const DeviceTensor& t, DataType dtype);

// What `params` computes for one sequence alone: one batch entry of its lengths, packed [1, H, N,
// D], the same variants (ALiBi per head: that sequence's slopes), the mask without its batch
// dimension.
AttentionParams SequenceParams(const AttentionParams& params, const Sequence& seq);

// Runs `params` forward, and backward where `backward`, with random inputs from `seed` placed by
// its strides and layout at a slice of their buffers, and `values` (the mask's elements as
// support/mask_values.h's BroadcastMaskIndex lays them out, the slopes, the sinks). Checks each
// sequence's O, LSE, dQ, dK and dV against the reference of that sequence alone with its slopes
// and its part of the mask; rows that see no key exactly O = 0 and LSE -inf or the sink; dK and dV
// exactly 0 past each sequence's length (every row of a sequence without queries); every output
// element outside the sequences' rows untouched; dsinks and dbias summed over the sequences
// (DsinksError, DbiasError), dbias exactly 0 where no sequence has the pair; the mask's broadcast
// shape as derived from the sequences. No validation message.
void CheckSequencesAgainstReference(Context& context, const AttentionParams& params, const ScoreValues& values,
                                    uint32_t seed, bool backward);

}  // namespace vkflash::testing
