// Structs with a leading struct_size (include/vkflash/vkflash.h, "Conventions"): the library reads
// the fields the caller's struct_size covers and defaults (zeroes) the rest, and writes only those
// of an output struct, so that a header and a library of different versions agree.
#pragma once

#include <vkflash/result.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

namespace vkflash::c_api {

// The end of `field` in `type`: a version's size is the end of its last field (not sizeof, whose
// tail padding a later field may take).
#define VKF_C_API_END_OF(type, field) (offsetof(type, field) + sizeof(type::field))

// No struct of this API comes near this: a larger struct_size is garbage (an uninitialised
// field), refused before the library reads that far.
inline constexpr size_t kMaxStructSize = 64 * 1024;

inline Status CheckStructSize(size_t size, const char* type_name, size_t first_version_size) {
  if (size >= first_version_size && size <= kMaxStructSize) return Status::Ok();
  return Status::Error(ErrorCode::kInvalidArgument, std::string(type_name) + ".struct_size is " + std::to_string(size) +
                                                        ": set it to sizeof(" + type_name + ") (" +
                                                        std::to_string(first_version_size) + " bytes or more)");
}

// Copies the caller's `in` into `out`: the bytes in.struct_size covers, zero (every field's
// default) past them. Bytes past what this library knows (a newer header's fields) must be zero:
// kUnsupported otherwise, since the library cannot honour a field it does not know.
template <typename T>
Status ReadVersioned(const T& in, const char* type_name, size_t first_version_size, T* out) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>);
  const size_t size = in.struct_size;
  if (Status s = CheckStructSize(size, type_name, first_version_size); !s.ok()) return s;
  std::memset(static_cast<void*>(out), 0, sizeof(T));
  std::memcpy(static_cast<void*>(out), &in, std::min(size, sizeof(T)));
  const auto* bytes = reinterpret_cast<const unsigned char*>(&in);
  for (size_t i = sizeof(T); i < size; ++i) {
    if (bytes[i] != 0) {
      return Status::Error(ErrorCode::kUnsupported, std::string(type_name) + " sets a field unknown to this vkflash "
                                                        "library (struct_size " + std::to_string(size) +
                                                        ", this library's " + std::to_string(sizeof(T)) + ")");
    }
  }
  return Status::Ok();
}

// Writes `value` into the caller's `out`: the bytes out->struct_size covers, keeping struct_size.
template <typename T>
Status WriteVersioned(T value, const char* type_name, size_t first_version_size, T* out) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>);
  const size_t size = out->struct_size;
  if (Status s = CheckStructSize(size, type_name, first_version_size); !s.ok()) return s;
  value.struct_size = out->struct_size;
  std::memcpy(static_cast<void*>(out), &value, std::min(size, sizeof(T)));
  return Status::Ok();
}

}  // namespace vkflash::c_api
