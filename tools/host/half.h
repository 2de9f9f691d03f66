// IEEE 754 binary16 <-> binary32 conversion on the CPU (round to nearest even; inf/NaN kept).
#pragma once

#include <cstdint>

namespace vkflash::tools {

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
// The float16-rounded value of f, as a float.
inline float RoundToHalf(float f) { return HalfToFloat(FloatToHalf(f)); }

}  // namespace vkflash::tools
