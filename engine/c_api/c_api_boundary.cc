#include "c_api/c_api_boundary.h"

#include <new>
#include <stdexcept>
#include <string>

namespace vkflash::c_api {
namespace {

// One message per thread: what the last VkfResult-returning call on it said.
thread_local std::string t_message;
thread_local const char* t_message_text = "";
thread_local VkResult t_vk_result = VK_SUCCESS;

// Stands in when the message itself cannot be allocated.
constexpr const char* kUnstoredMessage = "out of memory: (the error message could not be stored)";

void SetMessage(const char* text, const char* detail = "") noexcept {
  try {
    t_message = std::string(text) + detail;
    t_message_text = t_message.c_str();
  } catch (...) {
    t_message_text = kUnstoredMessage;
  }
}

}  // namespace

VkfResult ToVkfResult(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return VKF_SUCCESS;
    case ErrorCode::kInvalidArgument: return VKF_ERROR_INVALID_ARGUMENT;
    case ErrorCode::kUnsupported: return VKF_ERROR_UNSUPPORTED;
    case ErrorCode::kDeviceNotFound: return VKF_ERROR_DEVICE_NOT_FOUND;
    case ErrorCode::kVulkan: return VKF_ERROR_VULKAN;
    case ErrorCode::kOutOfMemory: return VKF_ERROR_OUT_OF_MEMORY;
    case ErrorCode::kIo: return VKF_ERROR_IO;
  }
  return VKF_ERROR_UNKNOWN;
}

ErrorCode ToErrorCode(VkfResult result) {
  switch (result) {
    case VKF_SUCCESS: return ErrorCode::kOk;
    case VKF_ERROR_INVALID_ARGUMENT: return ErrorCode::kInvalidArgument;
    case VKF_ERROR_UNSUPPORTED: return ErrorCode::kUnsupported;
    case VKF_ERROR_DEVICE_NOT_FOUND: return ErrorCode::kDeviceNotFound;
    case VKF_ERROR_OUT_OF_MEMORY: return ErrorCode::kOutOfMemory;
    case VKF_ERROR_IO: return ErrorCode::kIo;
    default: return ErrorCode::kVulkan;  // VKF_ERROR_VULKAN, and codes ErrorCode has no name for
  }
}

VkfResult Report(const Status& status) noexcept {
  if (status.ok()) {
    t_message.clear();
    t_message_text = "";
    t_vk_result = VK_SUCCESS;
    return VKF_SUCCESS;
  }
  t_vk_result = status.vk_result();
  try {
    t_message = status.ToString();
    t_message_text = t_message.c_str();
  } catch (...) {
    t_message_text = kUnstoredMessage;
  }
  return ToVkfResult(status.code());
}

VkfResult ReportCurrentException() noexcept {
  t_vk_result = VK_SUCCESS;
  try {
    throw;
  } catch (const std::bad_alloc&) {
    SetMessage("out of memory: a host allocation failed");
    return VKF_ERROR_OUT_OF_MEMORY;
  } catch (const std::length_error&) {
    SetMessage("out of memory: a host allocation was too large");
    return VKF_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    SetMessage("unknown error: unexpected C++ exception: ", e.what());
  } catch (...) {
    SetMessage("unknown error: unexpected C++ exception");
  }
  return VKF_ERROR_UNKNOWN;
}

Status RequireNonNull(std::initializer_list<NamedPointer> pointers) {
  for (const NamedPointer& p : pointers) {
    if (p.pointer == nullptr) return Status::Error(ErrorCode::kInvalidArgument, std::string(p.name) + " is NULL");
  }
  return Status::Ok();
}

}  // namespace vkflash::c_api

extern "C" {

const char* vkfGetLastErrorMessage(void) { return vkflash::c_api::t_message_text; }

VkResult vkfGetLastVkResult(void) { return vkflash::c_api::t_vk_result; }

const char* vkfResultName(VkfResult result) {
  switch (result) {
    case VKF_SUCCESS: return "ok";
    case VKF_ERROR_UNKNOWN: return "unknown error";
    default: break;
  }
  if (result > VKF_SUCCESS || result < VKF_ERROR_UNKNOWN) return "unknown error";
  return vkflash::ErrorCodeName(vkflash::c_api::ToErrorCode(result));
}

}  // extern "C"
