// Integer division rounded up, for tile, chunk and workgroup counts.
#pragma once

#include <cstdint>

namespace vkflash {

inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace vkflash
