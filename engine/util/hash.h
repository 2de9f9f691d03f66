// FNV-1a 64-bit: small, dependency-free digest for pipeline keys and cache-file checksums. Not
// cryptographic: it detects corruption and tells kernels apart, nothing more.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vkflash {

inline constexpr uint64_t kFnv1aSeed = 0xcbf29ce484222325ull;

inline uint64_t Fnv1a64(const void* data, size_t bytes, uint64_t hash = kFnv1aSeed) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace vkflash
