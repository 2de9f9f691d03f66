// Tensor values as the bytes of a storage dtype (float32 as is, float16 rounded to nearest even)
// and back: the one conversion the CLI, the tests and the samples share.
#pragma once

#include <vkflash/vkflash.hpp>

#include <cstdint>
#include <vector>

namespace vkflash::tools {

// One element at `bytes` (DataTypeSize(dtype) bytes), as float / from float.
float LoadElement(const uint8_t* bytes, DataType dtype);
void StoreElement(uint8_t* bytes, float value, DataType dtype);

std::vector<uint8_t> PackTensor(const std::vector<float>& values, DataType dtype);
std::vector<float> UnpackTensor(const std::vector<uint8_t>& bytes, DataType dtype);

// A mask's values as its buffer holds them (AttentionParams::mask, MaskBytes: whole 4-byte words,
// zero-padded): float32 or float16 biases, or for a bool mask one byte per value, 0 where the
// value is 0 (blocked), 1 elsewhere.
std::vector<uint8_t> PackMask(const std::vector<float>& values, MaskType type);

}  // namespace vkflash::tools
