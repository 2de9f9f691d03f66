// vkflash — error handling for the public API.
//
// Nothing thrown crosses the API (engines often build with exceptions off): every call
// that can fail returns a Status, or a Result<T> holding either a T or a Status.
#pragma once

#include <vkflash/export.h>
#include <vulkan/vulkan.h>

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace vkflash {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something outside the contract (shape, dtype, buffer size)
  kUnsupported,      // valid, but this device/configuration cannot run it (head dim, missing feature)
  kDeviceNotFound,   // no Vulkan device, or none matching the selector
  kVulkan,           // a Vulkan call failed; vk_result() says which error
  kOutOfMemory,      // host or device allocation failed
  kIo,               // file read/write failed (pipeline cache, .npy)
};

VKFLASH_API const char* ErrorCodeName(ErrorCode code);

// Success, or an error code with a human-readable reason (and the VkResult when Vulkan failed).
class VKFLASH_API Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(ErrorCode code, std::string message, VkResult vk_result = VK_SUCCESS) {
    Status s;
    s.code_ = code;
    s.message_ = std::move(message);
    s.vk_result_ = vk_result;
    return s;
  }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  VkResult vk_result() const { return vk_result_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>", for logs.
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  VkResult vk_result_ = VK_SUCCESS;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design, like vk-bootstrap
  Result(Status error) : state_(std::move(error)) {  // NOLINT
    assert(!std::get<Status>(state_).ok() && "Result built from an OK status has no value");
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace vkflash
