#include "c_api/c_api_convert.h"

#include <cstring>
#include <string>

#include "c_api/c_api_versioned.h"

namespace vkflash::c_api {
namespace {

// The first version's size of each struct: the end of its last field. Fields appended later are
// optional (zero-defaulted), so these never change.
constexpr size_t kAttentionParamsV1 = VKF_C_API_END_OF(VkfAttentionParams, cu_seqlens_k_count);
constexpr size_t kContextCreateInfoV1 = VKF_C_API_END_OF(VkfContextCreateInfo, tile_overrides);
constexpr size_t kTileOverridesV1 = VKF_C_API_END_OF(VkfTileOverrides, decode_splits);
constexpr size_t kExternalDeviceV1 = VKF_C_API_END_OF(VkfExternalDevice, enabled);
constexpr size_t kForwardBuffersV1 = VKF_C_API_END_OF(VkfForwardBuffers, mask);
constexpr size_t kBackwardBuffersV1 = VKF_C_API_END_OF(VkfBackwardBuffers, dbias);
constexpr size_t kDeviceInfoV1 = VKF_C_API_END_OF(VkfDeviceInfo, use_decode_kernels);
constexpr size_t kKernelChoiceV1 = VKF_C_API_END_OF(VkfKernelChoice, matrix_granularity);

// The C enums are the C++ ones, value for value.
static_assert(VKF_DTYPE_FLOAT32 == uint32_t(DataType::kFloat32) && VKF_DTYPE_FLOAT16 == uint32_t(DataType::kFloat16));
static_assert(VKF_LAYOUT_BHSD == uint32_t(TensorLayout::kBhsd) && VKF_LAYOUT_BSHD == uint32_t(TensorLayout::kBshd));
static_assert(VKF_ALIBI_SLOPES_NONE == uint32_t(AlibiSlopes::kNone) &&
              VKF_ALIBI_SLOPES_PER_HEAD == uint32_t(AlibiSlopes::kPerHead) &&
              VKF_ALIBI_SLOPES_PER_BATCH_HEAD == uint32_t(AlibiSlopes::kPerBatchHead));
static_assert(VKF_MASK_TYPE_NONE == uint32_t(MaskType::kNone) && VKF_MASK_TYPE_FLOAT32 == uint32_t(MaskType::kFloat32) &&
              VKF_MASK_TYPE_FLOAT16 == uint32_t(MaskType::kFloat16) && VKF_MASK_TYPE_BOOL == uint32_t(MaskType::kBool));
static_assert(VKF_MESSAGE_SEVERITY_INFO == int(MessageSeverity::kInfo) &&
              VKF_MESSAGE_SEVERITY_WARNING == int(MessageSeverity::kWarning) &&
              VKF_MESSAGE_SEVERITY_ERROR == int(MessageSeverity::kError));
static_assert(VKF_ADOPTED_STORAGE_BUFFER_16BIT_BIT == uint32_t(kAdoptedStorageBuffer16Bit) &&
              VKF_ADOPTED_PUSH_DESCRIPTOR_BIT == uint32_t(kAdoptedPushDescriptor) &&
              VKF_ADOPTED_COOPERATIVE_MATRIX_NV_BIT == uint32_t(kAdoptedCooperativeMatrixNv) &&
              VKF_ADOPTED_COOPERATIVE_MATRIX_KHR_BIT == uint32_t(kAdoptedCooperativeMatrixKhr) &&
              VKF_ADOPTED_COOPERATIVE_MATRIX2_NV_BIT == uint32_t(kAdoptedCooperativeMatrix2Nv) &&
              VKF_ADOPTED_SHADER_FLOAT16_BIT == uint32_t(kAdoptedShaderFloat16) &&
              VKF_ADOPTED_SHADER_ATOMIC_FLOAT32_ADD_BIT == uint32_t(kAdoptedShaderAtomicFloat32Add));
static_assert(VKF_COOPERATIVE_MATRIX_API_NONE == int(CooperativeMatrixApi::kNone) &&
              VKF_COOPERATIVE_MATRIX_API_NV == int(CooperativeMatrixApi::kNv) &&
              VKF_COOPERATIVE_MATRIX_API_KHR == int(CooperativeMatrixApi::kKhr) &&
              VKF_COOPERATIVE_MATRIX_API_NV2 == int(CooperativeMatrixApi::kNv2));
static_assert(VKF_MAX_HEAD_DIM == kMaxHeadDim);
static_assert(VKF_MAX_ALIBI_SEQUENCE == kMaxAlibiSequence);

Status BadEnum(const char* field, uint32_t value, const char* allowed) {
  return Status::Error(ErrorCode::kInvalidArgument,
                       std::string(field) + " is " + std::to_string(value) + ": one of " + allowed);
}

// A C string (NULL is "").
std::string Text(const char* text) { return text ? text : ""; }

// `count` int32 values at `values`; NULL only with a count of 0.
Status ToVector(const int32_t* values, uint32_t count, const char* name, std::vector<int32_t>* out) {
  if (count == 0) return Status::Ok();
  if (values == nullptr) {
    return Status::Error(ErrorCode::kInvalidArgument, std::string("VkfAttentionParams.") + name + " is NULL with a count of " +
                                                          std::to_string(count));
  }
  out->assign(values, values + count);
  return Status::Ok();
}

std::optional<TensorStrides> ToStrides(const VkfTensorStrides* in) {
  if (in == nullptr) return std::nullopt;
  return TensorStrides{in->batch, in->head, in->row};
}

// Copies `text` into a fixed array, NUL-terminated, cut where it does not fit at a UTF-8
// character boundary (never inside a multi-byte character).
template <size_t N>
void CopyText(const std::string& text, char (&out)[N]) {
  size_t length = std::min(text.size(), N - 1);
  if (length < text.size()) {
    while (length > 0 && (static_cast<unsigned char>(text[length]) & 0xC0) == 0x80) --length;
  }
  std::memcpy(out, text.data(), length);
  std::memset(out + length, 0, N - length);
}

}  // namespace

Status ToTensorLayout(VkfTensorLayout in, TensorLayout* out) {
  if (in != VKF_LAYOUT_BHSD && in != VKF_LAYOUT_BSHD) return BadEnum("layout", in, "VKF_LAYOUT_BHSD, VKF_LAYOUT_BSHD");
  *out = TensorLayout(in);
  return Status::Ok();
}

Status ToAttentionParams(const VkfAttentionParams& caller, AttentionParams* out) {
  VkfAttentionParams in;
  if (Status s = ReadVersioned(caller, "VkfAttentionParams", kAttentionParamsV1, &in); !s.ok()) return s;
  if (in.dtype != VKF_DTYPE_FLOAT32 && in.dtype != VKF_DTYPE_FLOAT16) {
    return BadEnum("VkfAttentionParams.dtype", in.dtype, "VKF_DTYPE_FLOAT32, VKF_DTYPE_FLOAT16");
  }
  if (uint32_t(in.alibi) > VKF_ALIBI_SLOPES_PER_BATCH_HEAD) {
    return BadEnum("VkfAttentionParams.alibi", in.alibi, "VKF_ALIBI_SLOPES_NONE, _PER_HEAD, _PER_BATCH_HEAD");
  }
  if (uint32_t(in.mask.type) > VKF_MASK_TYPE_BOOL) {
    return BadEnum("VkfAttentionParams.mask.type", in.mask.type, "VKF_MASK_TYPE_NONE, _FLOAT32, _FLOAT16, _BOOL");
  }
  AttentionParams params;
  const VkfAttentionShape& shape = in.shape;
  params.shape = {shape.batch, shape.q_heads, shape.kv_heads, shape.q_len, shape.kv_len, shape.head_dim};
  params.dtype = DataType(in.dtype);
  params.causal = in.causal != VK_FALSE;
  if (in.has_window) params.window = {in.window.left, in.window.right};
  if (in.has_scale) params.scale = in.scale;
  params.softcap = in.softcap;
  params.alibi = AlibiSlopes(in.alibi);
  params.sinks = in.sinks != VK_FALSE;
  params.mask.type = MaskType(in.mask.type);
  params.mask.batch = !in.mask.broadcast_batch;
  params.mask.heads = !in.mask.broadcast_heads;
  params.mask.rows = !in.mask.broadcast_rows;
  params.mask.keys = !in.mask.broadcast_keys;
  params.deterministic = !in.nondeterministic;
  if (Status s = ToTensorLayout(in.layout, &params.layout); !s.ok()) return s;
  params.q_strides = ToStrides(in.q_strides);
  params.k_strides = ToStrides(in.k_strides);
  params.v_strides = ToStrides(in.v_strides);
  params.o_strides = ToStrides(in.o_strides);
  params.d_o_strides = ToStrides(in.d_o_strides);
  if (Status s = ToVector(in.kv_lengths, in.kv_lengths_count, "kv_lengths", &params.kv_lengths); !s.ok()) return s;
  if (Status s = ToVector(in.cu_seqlens_q, in.cu_seqlens_q_count, "cu_seqlens_q", &params.cu_seqlens_q); !s.ok()) return s;
  if (Status s = ToVector(in.cu_seqlens_k, in.cu_seqlens_k_count, "cu_seqlens_k", &params.cu_seqlens_k); !s.ok()) return s;
  *out = std::move(params);
  return Status::Ok();
}

Status ToContextOptions(const VkfContextCreateInfo* caller, ContextOptions* out) {
  ContextOptions options;
  if (caller == nullptr) {
    *out = std::move(options);
    return Status::Ok();
  }
  VkfContextCreateInfo in;
  if (Status s = ReadVersioned(*caller, "VkfContextCreateInfo", kContextCreateInfoV1, &in); !s.ok()) return s;
  options.device_selector = Text(in.device_selector);
  options.max_shared_bytes = in.max_shared_bytes;
  options.disable_subgroup_ops = in.disable_subgroup_ops != VK_FALSE;
  options.disable_push_descriptors = in.disable_push_descriptors != VK_FALSE;
  options.disable_float16_arithmetic = in.disable_float16_arithmetic != VK_FALSE;
  options.max_loop_iterations = in.max_loop_iterations;
  options.kernels = Text(in.kernels);
  options.enable_validation = in.enable_validation != VK_FALSE;
  if (in.message_callback != nullptr) {
    // Called from the validation layer's callback, inside a Vulkan call: nothing may escape.
    options.message_callback = [callback = in.message_callback, user_data = in.message_user_data](
                                   MessageSeverity severity, const std::string& message) noexcept {
      callback(VkfMessageSeverity(severity), message.c_str(), user_data);
    };
  }
  options.pipeline_cache_path = Text(in.pipeline_cache_path);
  options.pipeline_statistics = in.pipeline_statistics != VK_FALSE;
  if (in.tile_overrides != nullptr) {
    VkfTileOverrides tiles;
    if (Status s = ReadVersioned(*in.tile_overrides, "VkfTileOverrides", kTileOverridesV1, &tiles); !s.ok()) return s;
    options.tile_overrides = {Text(tiles.coopmat_forward), Text(tiles.coopmat2_forward), Text(tiles.coopmat2_dkdv),
                              Text(tiles.coopmat2_dq),     Text(tiles.decode_coopmat2),  Text(tiles.scalar_forward),
                              Text(tiles.scalar_backward), tiles.decode_splits};
  }
  *out = std::move(options);
  return Status::Ok();
}

Status ToExternalDevice(const VkfExternalDevice& caller, ExternalDevice* out) {
  VkfExternalDevice in;
  if (Status s = ReadVersioned(caller, "VkfExternalDevice", kExternalDeviceV1, &in); !s.ok()) return s;
  out->instance = in.instance;
  out->physical_device = in.physical_device;
  out->device = in.device;
  out->queue = in.queue;
  out->queue_family_index = in.queue_family_index;
  out->api_version = in.api_version == 0 ? VK_API_VERSION_1_1 : in.api_version;
  out->enabled = in.enabled;
  return Status::Ok();
}

BufferView ToBufferView(const VkfBufferView& in) { return {in.buffer, in.offset, in.size}; }
VkfBufferView ToVkfBufferView(const BufferView& in) { return {in.buffer, in.offset, in.size}; }
VkfTensorStrides ToVkfTensorStrides(const TensorStrides& in) { return {in.batch, in.head, in.row}; }

Status ToForwardBuffers(const VkfForwardBuffers& caller, ForwardBuffers* out) {
  VkfForwardBuffers in;
  if (Status s = ReadVersioned(caller, "VkfForwardBuffers", kForwardBuffersV1, &in); !s.ok()) return s;
  *out = {ToBufferView(in.q),         ToBufferView(in.k),
          ToBufferView(in.v),         ToBufferView(in.o),
          ToBufferView(in.lse),       ToBufferView(in.workspace),
          ToBufferView(in.alibi_slopes), ToBufferView(in.sinks),
          ToBufferView(in.mask)};
  return Status::Ok();
}

Status ToBackwardBuffers(const VkfBackwardBuffers& caller, BackwardBuffers* out) {
  VkfBackwardBuffers in;
  if (Status s = ReadVersioned(caller, "VkfBackwardBuffers", kBackwardBuffersV1, &in); !s.ok()) return s;
  *out = {ToBufferView(in.q),     ToBufferView(in.k),         ToBufferView(in.v),
          ToBufferView(in.o),     ToBufferView(in.lse),       ToBufferView(in.d_o),
          ToBufferView(in.dq),    ToBufferView(in.dk),        ToBufferView(in.dv),
          ToBufferView(in.workspace), ToBufferView(in.alibi_slopes), ToBufferView(in.sinks),
          ToBufferView(in.dsinks), ToBufferView(in.mask),     ToBufferView(in.dbias)};
  return Status::Ok();
}

Status WriteDeviceInfo(const DeviceInfo& in, VkfDeviceInfo* out) {
  VkfDeviceInfo info{};
  info.index = in.index;
  CopyText(in.name, info.name);
  CopyText(in.driver, info.driver);
  info.type = in.type;
  info.vendor_id = in.vendor_id;
  info.device_id = in.device_id;
  info.api_version = in.api_version;
  info.driver_version = in.driver_version;
  std::memcpy(info.pipeline_cache_uuid, in.pipeline_cache_uuid, VK_UUID_SIZE);
  info.shared_memory_bytes = in.shared_memory_bytes;
  info.max_workgroup_invocations = in.max_workgroup_invocations;
  for (int i = 0; i < 3; ++i) info.max_workgroup_count[i] = in.max_workgroup_count[i];
  info.max_storage_buffer_range = in.max_storage_buffer_range;
  info.max_buffer_size = in.max_buffer_size;
  info.min_storage_buffer_offset_alignment = in.min_storage_buffer_offset_alignment;
  info.subgroup_size = in.subgroup_size;
  info.min_subgroup_size = in.min_subgroup_size;
  info.max_subgroup_size = in.max_subgroup_size;
  info.subgroup_shuffle_in_compute = in.subgroup_shuffle_in_compute;
  info.subgroup_vote_in_compute = in.subgroup_vote_in_compute;
  info.storage_buffer_16bit = in.storage_buffer_16bit;
  info.shader_float16 = in.shader_float16;
  info.buffer_float32_atomic_add = in.buffer_float32_atomic_add;
  info.push_descriptor = in.push_descriptor;
  info.nv_cooperative_matrix = in.nv_cooperative_matrix;
  info.khr_cooperative_matrix = in.khr_cooperative_matrix;
  info.nv_cooperative_matrix_f16 = in.nv_cooperative_matrix_f16;
  info.khr_cooperative_matrix_f16 = in.khr_cooperative_matrix_f16;
  info.nv_cooperative_matrix2 = in.nv_cooperative_matrix2;
  info.nv_cooperative_matrix2_f16 = in.nv_cooperative_matrix2_f16;
  info.cooperative_matrix2_granularity = in.cooperative_matrix2_granularity;
  info.cooperative_matrix2_reserved_shared_memory = in.cooperative_matrix2_reserved_shared_memory;
  info.cooperative_matrix2_subgroup_granularity = in.cooperative_matrix2_subgroup_granularity;
  info.timestamp_period_ns = in.timestamp_period_ns;
  info.compute_units = in.compute_units;
  info.shader_loop_budget = in.shader_loop_budget;
  info.usable_shared_memory_bytes = in.usable_shared_memory_bytes;
  info.use_subgroup_ops = in.use_subgroup_ops;
  info.use_push_descriptors = in.use_push_descriptors;
  info.use_float16_arithmetic = in.use_float16_arithmetic;
  info.use_float32_atomic_add = in.use_float32_atomic_add;
  info.cooperative_matrix = VkfCooperativeMatrixApi(in.cooperative_matrix);
  CopyText(in.cooperative_matrix_note, info.cooperative_matrix_note);
  info.use_cooperative_matrix2 = in.use_cooperative_matrix2;
  info.use_decode_kernels = in.use_decode_kernels;
  return WriteVersioned(info, "VkfDeviceInfo", kDeviceInfoV1, out);
}

Status CheckDeviceInfoStride(uint32_t struct_size) {
  if (Status s = CheckStructSize(struct_size, "VkfDeviceInfo", kDeviceInfoV1); !s.ok()) return s;
  if (struct_size % alignof(VkfDeviceInfo) != 0) {
    return Status::Error(ErrorCode::kInvalidArgument, "VkfDeviceInfo.struct_size is " + std::to_string(struct_size) +
                                                          ": not the size of an array element (sizeof(VkfDeviceInfo))");
  }
  return Status::Ok();
}

Status WriteKernelChoice(const KernelChoice& in, VkfKernelChoice* out) {
  VkfKernelChoice choice{};
  CopyText(in.kernel, choice.kernel);
  CopyText(in.family, choice.family);
  choice.block_q = in.block_q;
  choice.block_kv = in.block_kv;
  choice.threads_per_row = in.threads_per_row;
  choice.workgroup_size = in.workgroup_size;
  choice.subgroup_reductions = in.subgroup_reductions;
  choice.shared_memory_bytes = in.shared_memory_bytes;
  choice.cooperative_matrix = VkfCooperativeMatrixApi(in.cooperative_matrix);
  choice.subgroup_size = in.subgroup_size;
  choice.matrix_granularity = in.matrix_granularity;
  return WriteVersioned(choice, "VkfKernelChoice", kKernelChoiceV1, out);
}

}  // namespace vkflash::c_api
