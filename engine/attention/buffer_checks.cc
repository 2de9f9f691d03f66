#include "attention/buffer_checks.h"

#include <string>

#include "util/status_macros.h"

namespace vkflash::attention {
namespace {

bool Overlap(const NamedView& a, const NamedView& b) {
  if (a.view.buffer != b.view.buffer) return false;
  const uint64_t a_end = a.view.offset + a.required_bytes, b_end = b.view.offset + b.required_bytes;
  return a.view.offset < b_end && b.view.offset < a_end;
}

}  // namespace

Status CheckViews(const DeviceInfo& device, const std::vector<NamedView>& views) {
  for (const NamedView& v : views) {
    const std::string name = v.name;
    if (v.view.buffer == VK_NULL_HANDLE) {
      return Status::Error(ErrorCode::kInvalidArgument, "buffer '" + name + "' is VK_NULL_HANDLE");
    }
    if (v.view.size < v.required_bytes) {
      return Status::Error(ErrorCode::kInvalidArgument, "buffer '" + name + "' holds " + std::to_string(v.view.size) +
                                                            " bytes; the shape needs " + std::to_string(v.required_bytes));
    }
    const uint64_t bound_bytes = v.largest_part_bytes != 0 ? v.largest_part_bytes : v.required_bytes;
    if (bound_bytes > device.max_storage_buffer_range) {
      return Status::Error(ErrorCode::kUnsupported,
                           std::string(v.largest_part_bytes != 0 ? "a part of '" : "tensor '") + name + "' needs " +
                               std::to_string(bound_bytes) +
                               " bytes, more than this device's maxStorageBufferRange (" +
                               std::to_string(device.max_storage_buffer_range) + ")");
    }
    if (device.min_storage_buffer_offset_alignment > 1 && v.view.offset % device.min_storage_buffer_offset_alignment) {
      return Status::Error(ErrorCode::kInvalidArgument,
                           "buffer '" + name + "' offset " + std::to_string(v.view.offset) +
                               " is not a multiple of minStorageBufferOffsetAlignment (" +
                               std::to_string(device.min_storage_buffer_offset_alignment) + ")");
    }
  }
  return Status::Ok();
}

Status CheckNoOverlap(const std::vector<NamedView>& outputs, const std::vector<NamedView>& inputs) {
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    for (const NamedView& in : inputs) {
      if (Overlap(*out, in)) {
        return Status::Error(ErrorCode::kInvalidArgument,
                             std::string("output '") + out->name + "' overlaps input '" + in.name + "'");
      }
    }
    for (auto other = out + 1; other != outputs.end(); ++other) {
      if (Overlap(*out, *other)) {
        return Status::Error(ErrorCode::kInvalidArgument,
                             std::string("outputs '") + out->name + "' and '" + other->name + "' overlap");
      }
    }
  }
  return Status::Ok();
}

Status CheckNoStrayScoreModViews(const AttentionParams& params, const BufferView& alibi_slopes, const BufferView& sinks,
                                 const BufferView& mask) {
  if (params.alibi == AlibiSlopes::kNone && !alibi_slopes.empty()) {
    return Status::Error(ErrorCode::kInvalidArgument, "buffer 'alibi_slopes' is given but the call has no ALiBi (params.alibi)");
  }
  if (!params.sinks && !sinks.empty()) {
    return Status::Error(ErrorCode::kInvalidArgument, "buffer 'sinks' is given but the call has no sinks (params.sinks)");
  }
  if (params.mask.type == MaskType::kNone && !mask.empty()) {
    return Status::Error(ErrorCode::kInvalidArgument, "buffer 'mask' is given but the call has no mask (params.mask)");
  }
  return Status::Ok();
}

Result<std::vector<NamedView>> CheckScoreModViews(const DeviceInfo& device, const AttentionParams& params,
                                                  const BufferView& alibi_slopes, const BufferView& sinks,
                                                  const BufferView& mask) {
  VKF_RETURN_IF_ERROR(CheckNoStrayScoreModViews(params, alibi_slopes, sinks, mask));
  const uint64_t heads = params.shape.q_heads;
  std::vector<NamedView> views;
  if (params.alibi == AlibiSlopes::kPerHead) views.push_back({"alibi_slopes", alibi_slopes, heads * sizeof(float)});
  if (params.alibi == AlibiSlopes::kPerBatchHead) {
    views.push_back({"alibi_slopes", alibi_slopes, uint64_t(params.shape.batch) * heads * sizeof(float)});
  }
  if (params.sinks) views.push_back({"sinks", sinks, heads * sizeof(float)});
  if (params.mask.type != MaskType::kNone && MaskElements(params) > 0) views.push_back({"mask", mask, MaskBytes(params)});
  if (Status checked = CheckViews(device, views); !checked.ok()) return checked;
  return views;
}

bool VectorAligned(std::initializer_list<BufferView> views) {
  for (const BufferView& view : views)
    if (view.offset % 16 != 0) return false;
  return true;
}

}  // namespace vkflash::attention
