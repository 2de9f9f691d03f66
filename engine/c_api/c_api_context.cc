// The C API's contexts, devices, buffers, pipelines and diagnostics (include/vkflash/vkflash.h),
// each call handed to the C++ API inside the boundary's guard.
#include <vkflash/diagnostics.hpp>
#include <vkflash/version.h>
#include <vkflash/vkflash.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "c_api/c_api_boundary.h"
#include "c_api/c_api_convert.h"
#include "c_api/c_api_handles.h"
#include "util/status_macros.h"

namespace vkflash::c_api {
namespace {

Status RequireContext(VkfContext context) {
  if (context == nullptr || context->context == nullptr) {
    return Status::Error(ErrorCode::kInvalidArgument, "context is NULL");
  }
  return Status::Ok();
}

// Wraps a made context in its handle.
VkfContext NewHandle(std::unique_ptr<Context> made) {
  auto handle = std::make_unique<VkfContext_T>();
  handle->context = std::move(made);
  return handle.release();
}

}  // namespace
}  // namespace vkflash::c_api

using namespace vkflash;
using namespace vkflash::c_api;

extern "C" {

void vkfGetVersion(uint32_t* major, uint32_t* minor, uint32_t* patch) {
  if (major) *major = VKFLASH_VERSION_MAJOR;
  if (minor) *minor = VKFLASH_VERSION_MINOR;
  if (patch) *patch = VKFLASH_VERSION_PATCH;
}

size_t vkfDataTypeSize(VkfDataType type) {
  switch (type) {
    case VKF_DTYPE_FLOAT32: return 4;
    case VKF_DTYPE_FLOAT16: return 2;
    default: return 0;
  }
}

const char* vkfDeviceTypeName(VkPhysicalDeviceType type) { return DeviceTypeName(type); }

const char* vkfCooperativeMatrixApiName(VkfCooperativeMatrixApi api) {
  return CooperativeMatrixApiName(CooperativeMatrixApi(api));
}

const char* vkfPipelineCacheStateName(VkfPipelineCacheState state) {
  return PipelineCacheStateName(PipelineCacheState(state));
}

// ---- Devices ----

VkfResult vkfEnumerateDevices(VkfDeviceInfo* infos, uint32_t capacity, uint32_t* count) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{count, "count"}}));
    if (capacity > 0) {
      VKF_RETURN_IF_ERROR(RequireNonNull({{infos, "infos (with a capacity above 0)"}}));
      VKF_RETURN_IF_ERROR(CheckDeviceInfoStride(infos[0].struct_size));
    }
    VKF_ASSIGN_OR_RETURN(const std::vector<DeviceInfo> devices, EnumerateDevices());
    const size_t stride = capacity > 0 ? infos[0].struct_size : 0;
    auto element = [&](size_t i) { return reinterpret_cast<VkfDeviceInfo*>(reinterpret_cast<char*>(infos) + i * stride); };
    const size_t written = std::min<size_t>(capacity, devices.size());
    for (size_t i = 0; i < written; ++i) {
      if (element(i)->struct_size != stride) {
        return Status::Error(ErrorCode::kInvalidArgument, "infos[" + std::to_string(i) + "].struct_size is " +
                                                              std::to_string(element(i)->struct_size) + ", infos[0]'s " +
                                                              std::to_string(stride) + ": set it in every element");
      }
    }
    for (size_t i = 0; i < written; ++i) VKF_RETURN_IF_ERROR(WriteDeviceInfo(devices[i], element(i)));
    *count = uint32_t(devices.size());
    return Status::Ok();
  });
}

VkfResult vkfSelectDeviceIndex(const char* selector, uint32_t* index) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{index, "index"}}));
    VKF_ASSIGN_OR_RETURN(*index, SelectDeviceIndex(selector ? selector : ""));
    return Status::Ok();
  });
}

const char* vkfGetKernelsOptionValue(uint32_t index) {
  try {
    static const std::vector<std::string> values = KernelsOptionValues();
    return index < values.size() ? values[index].c_str() : nullptr;
  } catch (...) {
    return nullptr;  // the list could not be made (out of memory): as past its end
  }
}

// ---- Contexts ----

VkfResult vkfCreateContext(const VkfContextCreateInfo* info, VkfContext* context) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{context, "context (the output)"}}));
    *context = nullptr;
    ContextOptions options;
    VKF_RETURN_IF_ERROR(ToContextOptions(info, &options));
    VKF_ASSIGN_OR_RETURN(auto made, Context::Create(options));
    *context = NewHandle(std::move(made));
    return Status::Ok();
  });
}

VkfResult vkfAdoptDevice(const VkfExternalDevice* device, const VkfContextCreateInfo* info, VkfContext* context) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{context, "context (the output)"}}));
    *context = nullptr;
    VKF_RETURN_IF_ERROR(RequireNonNull({{device, "device"}}));
    ExternalDevice external;
    VKF_RETURN_IF_ERROR(ToExternalDevice(*device, &external));
    ContextOptions options;
    VKF_RETURN_IF_ERROR(ToContextOptions(info, &options));
    VKF_ASSIGN_OR_RETURN(auto made, Context::Adopt(external, options));
    *context = NewHandle(std::move(made));
    return Status::Ok();
  });
}

void vkfDestroyContext(VkfContext context) {
  if (context == nullptr) return;
  try {
    for (VkfBuffer buffer : context->buffers) delete buffer;  // before the device they live on
    context->buffers.clear();
  } catch (...) {
  }
  delete context;  // ~Context: best effort throughout, it throws nothing
}

VkfResult vkfGetDeviceInfo(VkfContext context, VkfDeviceInfo* info) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    VKF_RETURN_IF_ERROR(RequireNonNull({{info, "info"}}));
    return WriteDeviceInfo(context->context->device_info(), info);
  });
}

VkfResult vkfGetDevice(VkfContext context, VkDevice* device) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    VKF_RETURN_IF_ERROR(RequireNonNull({{device, "device"}}));
    *device = context->context->device();
    return Status::Ok();
  });
}

// ---- Buffers ----

VkfResult vkfCreateBuffer(VkfContext context, VkDeviceSize bytes, VkfBuffer* buffer) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{buffer, "buffer (the output)"}}));
    *buffer = nullptr;
    VKF_RETURN_IF_ERROR(RequireContext(context));
    auto handle = std::make_unique<VkfBuffer_T>();
    VKF_ASSIGN_OR_RETURN(handle->buffer, context->context->CreateBuffer(bytes));
    context->buffers.insert(handle.get());
    *buffer = handle.release();
    return Status::Ok();
  });
}

void vkfDestroyBuffer(VkfContext context, VkfBuffer buffer) {
  if (context == nullptr || buffer == nullptr || context->buffers.erase(buffer) == 0) return;
  delete buffer;
}

VkfBufferView vkfGetBufferView(VkfBuffer buffer) {
  if (buffer == nullptr) return VkfBufferView{VK_NULL_HANDLE, 0, 0};
  return ToVkfBufferView(buffer->buffer.view());
}

VkfResult vkfUpload(VkfContext context, VkfBufferView dst, const void* src, size_t bytes) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    if (bytes > 0) VKF_RETURN_IF_ERROR(RequireNonNull({{src, "src"}}));
    return context->context->Upload(ToBufferView(dst), src, bytes);
  });
}

VkfResult vkfDownload(VkfContext context, VkfBufferView src, void* dst, size_t bytes) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    if (bytes > 0) VKF_RETURN_IF_ERROR(RequireNonNull({{dst, "dst"}}));
    return context->context->Download(ToBufferView(src), dst, bytes);
  });
}

VkfResult vkfForgetBuffer(VkfContext context, VkBuffer buffer) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    context->context->ForgetBuffer(buffer);
    return Status::Ok();
  });
}

// ---- Pipelines and memory ----

VkfResult vkfSavePipelineCache(VkfContext context, const char* path) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    return context->context->SavePipelineCache(path ? path : "");
  });
}

VkfResult vkfGetPipelineCacheState(VkfContext context, VkfPipelineCacheState* state) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    VKF_RETURN_IF_ERROR(RequireNonNull({{state, "state"}}));
    *state = VkfPipelineCacheState(context->context->pipeline_cache_state());
    return Status::Ok();
  });
}

VkfResult vkfGetPipelineCount(VkfContext context, uint64_t* count) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    VKF_RETURN_IF_ERROR(RequireNonNull({{count, "count"}}));
    *count = context->context->pipeline_count();
    return Status::Ok();
  });
}

VkfResult vkfGetAllocatedBytes(VkfContext context, uint64_t* bytes) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    VKF_RETURN_IF_ERROR(RequireNonNull({{bytes, "bytes"}}));
    *bytes = context->context->allocated_bytes();
    return Status::Ok();
  });
}

VkfResult vkfGetPeakAllocatedBytes(VkfContext context, uint64_t* bytes) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    VKF_RETURN_IF_ERROR(RequireNonNull({{bytes, "bytes"}}));
    *bytes = context->context->peak_allocated_bytes();
    return Status::Ok();
  });
}

VkfResult vkfResetPeakAllocatedBytes(VkfContext context) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    context->context->ResetPeakAllocatedBytes();
    return Status::Ok();
  });
}

// ---- Diagnostics ----

VkfResult vkfMeasureGpuTime(VkfContext context, VkfRecordCallback record, void* user_data, uint32_t runs,
                            double* milliseconds) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireContext(context));
    if (record == nullptr) return Status::Error(ErrorCode::kInvalidArgument, "record is NULL");
    VKF_RETURN_IF_ERROR(RequireNonNull({{milliseconds, "milliseconds"}}));
    if (runs == 0) return Status::Error(ErrorCode::kInvalidArgument, "runs is 0");
    auto record_cpp = [&](VkCommandBuffer cmd) -> Status {
      const VkfResult result = record(cmd, user_data);
      if (result == VKF_SUCCESS) return Status::Ok();
      // The callback's own vkf call left its reason in this thread's last error.
      const std::string reason = vkfGetLastErrorMessage();
      return Status::Error(ToErrorCode(result), std::string("the record callback returned ") + vkfResultName(result) +
                                                    (reason.empty() ? "" : " (" + reason + ")"));
    };
    VKF_ASSIGN_OR_RETURN(const std::vector<double> times, MeasureGpuTime(*context->context, record_cpp, runs));
    std::copy(times.begin(), times.end(), milliseconds);
    return Status::Ok();
  });
}

}  // extern "C"
