// The C API's boundary (include/vkflash/vkflash.h): this thread's last error, ErrorCode <->
// VkfResult, and the guard that keeps C++ exceptions from crossing into C.
#pragma once

#include <vkflash/result.hpp>
#include <vkflash/vkflash.h>

#include <initializer_list>

namespace vkflash::c_api {

VkfResult ToVkfResult(ErrorCode code);
ErrorCode ToErrorCode(VkfResult result);

// Sets this thread's last error from `status` ("" and VK_SUCCESS when it is OK) and returns its
// VkfResult. Never throws: where the message cannot be stored, a fixed one stands in.
VkfResult Report(const Status& status) noexcept;

// Inside a catch block: reports the exception being handled (bad_alloc and length_error as
// VKF_ERROR_OUT_OF_MEMORY, anything else as VKF_ERROR_UNKNOWN).
VkfResult ReportCurrentException() noexcept;

// Runs `body` (returning a Status) and reports its outcome; nothing it throws escapes.
template <typename Body>
VkfResult Guarded(Body&& body) noexcept {
  try {
    return Report(body());
  } catch (...) {
    return ReportCurrentException();
  }
}

// A pointer argument and its name, for RequireNonNull.
struct NamedPointer {
  const void* pointer;
  const char* name;
};

// kInvalidArgument "<name> is NULL" for the first NULL pointer, else OK.
Status RequireNonNull(std::initializer_list<NamedPointer> pointers);

}  // namespace vkflash::c_api
