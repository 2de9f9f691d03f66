#include "attention/call_layout.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "attention/key_band.h"
#include "util/status_macros.h"
#include "vulkan/barriers.h"

namespace vkflash::attention {
namespace {

Status Invalid(const std::string& message) { return Status::Error(ErrorCode::kInvalidArgument, message); }

// One tensor's index ranges: batch entries (1 for a ragged tensor), heads, rows.
struct Extents {
  uint64_t batch, heads, rows;
};

// Checks that no two (batch, head, row) rows of `head_dim` elements overlap (the strides nest, in
// some order) and returns the elements the strides reach. An empty tensor reaches none.
Result<uint64_t> ReachedElements(const char* name, const TensorStrides& strides, const Extents& extents,
                                 uint32_t head_dim) {
  if (extents.batch == 0 || extents.heads == 0 || extents.rows == 0) return uint64_t{0};
  std::array<std::pair<uint64_t, uint64_t>, 3> dims = {{{strides.batch, extents.batch},
                                                         {strides.head, extents.heads},
                                                         {strides.row, extents.rows}}};
  std::sort(dims.begin(), dims.end());
  uint64_t span = head_dim;  // elements from a block's first to its last, + 1
  for (const auto& [stride, extent] : dims) {
    if (extent <= 1) continue;
    if (stride < span) {
      return Invalid(std::string("the strides of '") + name + "' make rows overlap (batch " +
                     std::to_string(strides.batch) + ", head " + std::to_string(strides.head) + ", row " +
                     std::to_string(strides.row) + " elements, head dim " + std::to_string(head_dim) + ")");
    }
    // The kernels index elements with 32-bit integers (span <= UINT32_MAX here, stride >= span > 0).
    if (extent - 1 > (UINT32_MAX - span) / stride) {
      return Status::Error(ErrorCode::kUnsupported, std::string("the strides of '") + name + "' reach past 2^32 elements");
    }
    span += stride * (extent - 1);
  }
  return span;
}

// Offsets of a ragged dimension: batch + 1 of them, non-decreasing, from >= 0, the last within
// the tensor's `rows`.
Status CheckOffsets(const char* name, const std::vector<int32_t>& offsets, uint32_t batch, uint32_t rows,
                    const char* rows_name) {
  if (offsets.size() != uint64_t(batch) + 1) {
    return Invalid(std::string(name) + " has " + std::to_string(offsets.size()) + " entries; batch " +
                   std::to_string(batch) + " needs " + std::to_string(uint64_t(batch) + 1));
  }
  if (offsets[0] < 0) return Invalid(std::string(name) + "[0] is negative");
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) {
      return Invalid(std::string(name) + " is not increasing: entry " + std::to_string(i) + " (" +
                     std::to_string(offsets[i]) + ") is below entry " + std::to_string(i - 1) + " (" +
                     std::to_string(offsets[i - 1]) + ")");
    }
  }
  if (uint64_t(offsets.back()) > rows) {
    return Invalid(std::string(name) + " ends at row " + std::to_string(offsets.back()) + ", past the " +
                   std::to_string(rows) + " rows of " + rows_name);
  }
  return Status::Ok();
}

}  // namespace

Result<CallLayout> ResolveCallLayout(const AttentionParams& params, bool backward) {
  VKF_RETURN_IF_ERROR(ValidateAttentionParams(params));
  const AttentionShape& shape = params.shape;
  if (params.layout != TensorLayout::kBhsd && params.layout != TensorLayout::kBshd) return Invalid("unknown layout");
  const bool ragged_q = !params.cu_seqlens_q.empty(), ragged_k = !params.cu_seqlens_k.empty();
  if (ragged_q) VKF_RETURN_IF_ERROR(CheckOffsets("cu_seqlens_q", params.cu_seqlens_q, shape.batch, shape.q_len, "Q (q_len)"));
  if (ragged_k) VKF_RETURN_IF_ERROR(CheckOffsets("cu_seqlens_k", params.cu_seqlens_k, shape.batch, shape.kv_len, "K (kv_len)"));
  if (!params.kv_lengths.empty() && params.kv_lengths.size() != shape.batch) {
    return Invalid("kv_lengths has " + std::to_string(params.kv_lengths.size()) + " entries; batch is " +
                   std::to_string(shape.batch));
  }

  CallLayout call;
  call.planning = params;
  call.mask = MaskShapeOf(params);
  // The kernels plan with the shape alone; these are resolved here.
  call.planning.kv_lengths.clear();
  call.planning.cu_seqlens_q.clear();
  call.planning.cu_seqlens_k.clear();

  // Strides: each tensor's own, else the packed layout (ragged tensors: one batch entry of all rows).
  const auto packed = [&](uint32_t heads, uint32_t rows) { return PackedStrides(params.layout, heads, rows, shape.head_dim); };
  const TensorStrides q_like = packed(shape.q_heads, shape.q_len), kv_like = packed(shape.kv_heads, shape.kv_len);
  const std::array<std::optional<TensorStrides>, 5> given = {params.q_strides, params.k_strides, params.v_strides,
                                                             params.o_strides, params.d_o_strides};
  const std::array<const char*, 5> names = {"q", "k", "v", "o", "d_o"};
  call.packed = !params.has_sequences();
  for (int t = 0; t < 5; ++t) {
    const bool key_tensor = t == VKF_TENSOR_K || t == VKF_TENSOR_V;
    const bool ragged = key_tensor ? ragged_k : ragged_q;
    TensorStrides strides = given[t].value_or(key_tensor ? kv_like : q_like);
    const TensorStrides bhsd = PackedStrides(TensorLayout::kBhsd, key_tensor ? shape.kv_heads : shape.q_heads,
                                             key_tensor ? shape.kv_len : shape.q_len, shape.head_dim);
    if (strides.batch != bhsd.batch || strides.head != bhsd.head || strides.row != bhsd.row) call.packed = false;
    if (ragged) strides.batch = 0;  // one packed run of rows
    const Extents extents{ragged ? 1u : shape.batch, key_tensor ? shape.kv_heads : shape.q_heads,
                          key_tensor ? shape.kv_len : shape.q_len};
    VKF_ASSIGN_OR_RETURN(const uint64_t elements, ReachedElements(names[t], strides, extents, shape.head_dim));
    call.required_bytes[t] = elements * DataTypeSize(params.dtype);
    call.strides[t] = {uint32_t(strides.batch), uint32_t(strides.head), uint32_t(strides.row)};
    if (strides.batch % 8 != 0 || strides.head % 8 != 0 || strides.row % 8 != 0) call.vector_strides = false;
  }
  // The LSE (and the backward's delta): [B, Hq, q_len], or [Hq, q_len] for ragged queries.
  call.strides[VKF_TENSOR_LSE] = {ragged_q ? 0u : shape.q_heads * shape.q_len, shape.q_len, 1u};
  call.required_bytes[VKF_TENSOR_LSE] = uint64_t(ragged_q ? 1 : shape.batch) * shape.q_heads * shape.q_len * sizeof(float);

  if (!params.has_sequences()) return call;

  // The sequences: lengths and first rows per batch entry.
  uint32_t longest_q = 0, longest_kv = 0, most_kv_rows = 0;
  call.sequence_table.resize(uint64_t(shape.batch) * VKF_SEQUENCE_UINTS);
  for (uint32_t b = 0; b < shape.batch; ++b) {
    uint32_t* entry = &call.sequence_table[uint64_t(b) * VKF_SEQUENCE_UINTS];
    entry[VKF_SEQUENCE_Q_ROW0] = ragged_q ? uint32_t(params.cu_seqlens_q[b]) : 0;
    entry[VKF_SEQUENCE_Q_LEN] = ragged_q ? uint32_t(params.cu_seqlens_q[b + 1] - params.cu_seqlens_q[b]) : shape.q_len;
    entry[VKF_SEQUENCE_KV_ROW0] = ragged_k ? uint32_t(params.cu_seqlens_k[b]) : 0;
    const uint32_t kv_rows = ragged_k ? uint32_t(params.cu_seqlens_k[b + 1] - params.cu_seqlens_k[b]) : shape.kv_len;
    entry[VKF_SEQUENCE_KV_ROWS] = kv_rows;
    entry[VKF_SEQUENCE_KV_LEN] = kv_rows;
    if (!params.kv_lengths.empty()) {
      const int32_t length = params.kv_lengths[b];
      if (length < 0 || uint32_t(length) > kv_rows) {
        return Invalid("kv_lengths[" + std::to_string(b) + "] is " + std::to_string(length) + ": sequence " +
                       std::to_string(b) + " holds " + std::to_string(kv_rows) + " key rows");
      }
      entry[VKF_SEQUENCE_KV_LEN] = uint32_t(length);
    }
    longest_q = std::max(longest_q, entry[VKF_SEQUENCE_Q_LEN]);
    longest_kv = std::max(longest_kv, entry[VKF_SEQUENCE_KV_LEN]);
    most_kv_rows = std::max(most_kv_rows, kv_rows);
  }
  call.planning.shape.q_len = longest_q;
  call.planning.shape.kv_len = backward ? most_kv_rows : longest_kv;
  for (uint32_t b = 0; b < shape.batch; ++b) {
    const uint32_t q_len = call.sequence_table[uint64_t(b) * VKF_SEQUENCE_UINTS + VKF_SEQUENCE_Q_LEN];
    if (q_len != 0 && q_len != longest_q) call.uniform_q_len = false;
  }
  return call;
}

gpu::AttentionPush MakeAttentionPush(const CallLayout& call) {
  const AttentionParams& params = call.planning;
  gpu::AttentionPush push{};
  push.batch = params.shape.batch;
  push.q_heads = params.shape.q_heads;
  push.kv_heads = params.shape.kv_heads;
  push.q_len = params.shape.q_len;
  push.kv_len = params.shape.kv_len;
  push.scale_log2 = params.effective_scale() * float(M_LOG2E);
  push.chunk_begin = 0;  // unchunked kernels ignore them
  push.chunk_end = UINT32_MAX;
  push.split_keys = UINT32_MAX;  // one split-K part
  push.sequence_table = call.sequence_table.empty() ? 0u : 1u;
  // Sides wider than any sequence cut nothing; capped so that the kernels' int sums cannot overflow.
  const KeyBand band = KeyBandOf(params);
  constexpr int32_t kWidest = 1 << 30;
  push.window_left = std::min(band.left, kWidest);
  push.window_right = std::min(band.right, kWidest);
  for (int t = 0; t < VKF_TENSOR_COUNT; ++t)
    for (int i = 0; i < 3; ++i) push.strides[3 * t + i] = call.strides[t][i];
  push.mask_q_len = call.mask.q_len;
  push.mask_kv_len = call.mask.kv_len;
  return push;
}

void RecordSequenceTable(VkCommandBuffer cmd, const CallLayout& call, const BufferView& part) {
  // The workspace may still be read or written by an earlier call's kernels (the caller's barrier
  // between calls that share it covers compute, not this transfer).
  vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                    VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
  constexpr VkDeviceSize kMaxUpdateBytes = 65536;  // vkCmdUpdateBuffer's limit per command
  const auto* bytes = reinterpret_cast<const uint8_t*>(call.sequence_table.data());
  for (VkDeviceSize at = 0; at < call.sequence_table_bytes(); at += kMaxUpdateBytes) {
    const VkDeviceSize size = std::min(kMaxUpdateBytes, call.sequence_table_bytes() - at);
    vkCmdUpdateBuffer(cmd, part.buffer, part.offset + at, size, bytes + at);
  }
  vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
}

}  // namespace vkflash::attention
