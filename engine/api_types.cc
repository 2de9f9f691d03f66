// The public API's small free functions: names, sizes and parameter validation.
#include <vkflash/diagnostics.hpp>

#include <algorithm>
#include <cmath>
#include <utility>
#include <string>

#include "attention/key_band.h"
#include "attention/mask_shape.h"
#include "common/shader_interface.h"

namespace vkflash {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kDeviceNotFound: return "device not found";
    case ErrorCode::kVulkan: return "vulkan error";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kIo: return "i/o error";
  }
  return "unknown error";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

size_t DataTypeSize(DataType type) { return type == DataType::kFloat16 ? 2 : 4; }

const char* DataTypeName(DataType type) { return type == DataType::kFloat16 ? "float16" : "float32"; }

const char* CooperativeMatrixApiName(CooperativeMatrixApi api) {
  switch (api) {
    case CooperativeMatrixApi::kNv: return "VK_NV_cooperative_matrix";
    case CooperativeMatrixApi::kKhr: return "VK_KHR_cooperative_matrix";
    case CooperativeMatrixApi::kNv2: return "VK_NV_cooperative_matrix2";
    case CooperativeMatrixApi::kNone: break;
  }
  return "none";
}

const char* DeviceTypeName(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

const char* PipelineCacheStateName(PipelineCacheState state) {
  switch (state) {
    case PipelineCacheState::kNotUsed: return "not used";
    case PipelineCacheState::kStartedEmpty: return "started empty";
    case PipelineCacheState::kLoaded: return "loaded";
    case PipelineCacheState::kIgnoredForeign: return "ignored (another device or driver)";
    case PipelineCacheState::kIgnoredCorrupt: return "ignored (corrupt)";
    case PipelineCacheState::kIgnoredUnreadable: return "ignored (cannot be read)";
  }
  return "unknown";
}

TensorStrides PackedStrides(TensorLayout layout, uint32_t heads, uint32_t rows, uint32_t head_dim) {
  const uint64_t d = head_dim;
  if (layout == TensorLayout::kBshd) return {uint64_t(rows) * heads * d, d, uint64_t(heads) * d};
  return {uint64_t(heads) * rows * d, uint64_t(rows) * d, d};
}

float AttentionParams::effective_scale() const {
  return scale.has_value() ? *scale : 1.0f / std::sqrt(float(shape.head_dim));
}

uint64_t ForwardStatsBytes(const AttentionShape& shape, const KernelChoice& choice) {
  if (choice.block_kv == 0) return 0;
  const uint64_t tiles = (uint64_t(shape.kv_len) + choice.block_kv - 1) / choice.block_kv;
  return shape.lse_elements() * tiles * 5 * sizeof(float);
}

Status ValidateAttentionParams(const AttentionParams& params) {
  const AttentionShape& s = params.shape;
  if (s.head_dim == 0 || s.head_dim > kMaxHeadDim) {
    return Status::Error(ErrorCode::kUnsupported, "head dim " + std::to_string(s.head_dim) +
                                                      " is not supported (1.." + std::to_string(kMaxHeadDim) + ")");
  }
  if (s.q_heads == 0 || s.kv_heads == 0) {
    return Status::Error(ErrorCode::kInvalidArgument, "q_heads and kv_heads must be at least 1");
  }
  if (s.q_heads % s.kv_heads != 0) {
    return Status::Error(ErrorCode::kInvalidArgument, "q_heads (" + std::to_string(s.q_heads) +
                                                          ") must be a multiple of kv_heads (" +
                                                          std::to_string(s.kv_heads) + ")");
  }
  // The kernels index elements with 32-bit integers (a ragged tensor has one run of rows for the
  // whole batch; strides are checked where they are resolved).
  const AttentionShape q_rows{params.cu_seqlens_q.empty() ? s.batch : 1, s.q_heads, s.kv_heads, s.q_len, s.kv_len, s.head_dim};
  const AttentionShape kv_rows{params.cu_seqlens_k.empty() ? s.batch : 1, s.q_heads, s.kv_heads, s.q_len, s.kv_len, s.head_dim};
  if (q_rows.q_elements() > 0xffffffffull || kv_rows.kv_elements() > 0xffffffffull) {
    return Status::Error(ErrorCode::kUnsupported, "tensors of 2^32 or more elements are not supported");
  }
  if (params.scale.has_value() && !std::isfinite(*params.scale)) {
    return Status::Error(ErrorCode::kInvalidArgument, "scale must be a finite number");
  }
  if (params.dtype != DataType::kFloat32 && params.dtype != DataType::kFloat16) {
    return Status::Error(ErrorCode::kInvalidArgument, "unknown data type");
  }
  for (const auto& [side, keys] : {std::pair{"left", params.window.left}, std::pair{"right", params.window.right}}) {
    if (keys < -1) {
      return Status::Error(ErrorCode::kInvalidArgument, std::string("window ") + side + " is " + std::to_string(keys) +
                                                            ": a key count >= 0, or -1 for unbounded");
    }
  }
  // Subnormal caps are refused too: the kernels divide by the cap, which a device may flush to 0.
  if (params.softcap != 0.0f && !(std::isnormal(params.softcap) && params.softcap > 0.0f)) {
    return Status::Error(ErrorCode::kInvalidArgument, "softcap is " + std::to_string(params.softcap) +
                                                          ": a finite (normal) number > 0, or 0 for none");
  }
  if (params.alibi != AlibiSlopes::kNone && params.alibi != AlibiSlopes::kPerHead &&
      params.alibi != AlibiSlopes::kPerBatchHead) {
    return Status::Error(ErrorCode::kInvalidArgument, "unknown ALiBi slopes shape");
  }
  // The kernels turn ALiBi's distances into floats exactly up to 2^22 (score_mod.glsl's
  // small_int_to_float). A distance lies within one sequence: with cu_seqlens, the longest one's
  // lengths count (MaskShapeOf's), not the packed rows'.
  if (params.alibi != AlibiSlopes::kNone) {
    const attention::MaskShape lengths = attention::MaskShapeOf(params);
    if (std::max(lengths.q_len, lengths.kv_len) > kMaxAlibiSequence) {
      return Status::Error(ErrorCode::kUnsupported,
                           "ALiBi takes sequences of at most " + std::to_string(kMaxAlibiSequence) +
                               " queries and keys; this call's longest has Nq = " + std::to_string(lengths.q_len) +
                               ", Nk = " + std::to_string(lengths.kv_len));
    }
  }
  if (uint32_t(params.mask.type) > uint32_t(MaskType::kBool)) {
    return Status::Error(ErrorCode::kInvalidArgument, "unknown mask type");
  }
  if (params.mask.type != MaskType::kNone && attention::MaskShapeOf(params).elements() > 0xffffffffull) {
    return Status::Error(ErrorCode::kUnsupported, "masks of 2^32 or more elements are not supported");
  }
  if (params.causal && params.window.right > 0) {
    return Status::Error(ErrorCode::kInvalidArgument,
                         "window right is " + std::to_string(params.window.right) +
                             " with causal, which bounds it at 0: give -1 or 0, or leave causal off");
  }
  return Status::Ok();
}

static_assert(uint32_t(AlibiSlopes::kNone) == VKF_ALIBI_NONE && uint32_t(AlibiSlopes::kPerHead) == VKF_ALIBI_PER_HEAD &&
                  uint32_t(AlibiSlopes::kPerBatchHead) == VKF_ALIBI_PER_BATCH_HEAD,
              "AlibiSlopes is the shaders' VKF_ALIBI_* (specialization constant)");

static_assert(uint32_t(MaskType::kNone) == VKF_MASK_NONE && uint32_t(MaskType::kFloat32) == VKF_MASK_FLOAT32 &&
                  uint32_t(MaskType::kFloat16) == VKF_MASK_FLOAT16 && uint32_t(MaskType::kBool) == VKF_MASK_BOOL,
              "MaskType is the shaders' VKF_MASK_* (specialization constant)");

std::array<uint32_t, 4> MaskBroadcastShape(const AttentionParams& params) {
  const attention::MaskShape mask = attention::MaskShapeOf(params);
  return {mask.batch, mask.heads, mask.q_len, mask.kv_len};
}

uint64_t MaskElements(const AttentionParams& params) {
  return params.mask.type == MaskType::kNone ? 0 : attention::MaskShapeOf(params).elements();
}

uint64_t MaskBytes(const AttentionParams& params) {
  const uint64_t element = params.mask.type == MaskType::kFloat32   ? 4
                           : params.mask.type == MaskType::kFloat16 ? 2
                                                                    : 1;
  return (MaskElements(params) * element + 3) / 4 * 4;  // whole words: the kernels read words
}

uint64_t VisiblePairs(const AttentionParams& params) {
  const attention::KeyBand band = attention::KeyBandOf(params);
  const AttentionShape& s = params.shape;
  uint64_t pairs = 0;
  for (uint32_t b = 0; b < s.batch; ++b) {
    // The sequence's lengths as docs/design.md's "Sequences" gives them (ValidateAttentionParams
    // does not check the offsets: a bad table counts what it names, clamped at 0).
    auto length = [](const std::vector<int32_t>& offsets, uint32_t b, uint32_t whole) -> uint32_t {
      if (offsets.size() <= b + 1) return whole;
      return uint32_t(std::max(offsets[b + 1] - offsets[b], 0));
    };
    const uint32_t q_len = length(params.cu_seqlens_q, b, s.q_len);
    uint32_t kv_len = length(params.cu_seqlens_k, b, s.kv_len);
    if (b < params.kv_lengths.size()) kv_len = uint32_t(std::max(params.kv_lengths[b], 0));
    pairs += attention::SequenceVisiblePairs(band, q_len, kv_len);
  }
  return pairs * s.q_heads;
}

}  // namespace vkflash
