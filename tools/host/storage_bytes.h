// Tensor values as the bytes of a storage dtype (float32 as is, float16 rounded to nearest even)
// and back: the one conversion the CLI, the tests and the samples share.
#pragma once

#include <vkflash/device_info.hpp>

#include <cstdint>
#include <vector>

namespace vkflash::tools {

// One element at `bytes` (DataTypeSize(dtype) bytes), as float / from float.
float LoadElement(const uint8_t* bytes, DataType dtype);
void StoreElement(uint8_t* bytes, float value, DataType dtype);

std::vector<uint8_t> PackTensor(const std::vector<float>& values, DataType dtype);
std::vector<float> UnpackTensor(const std::vector<uint8_t>& bytes, DataType dtype);

}  // namespace vkflash::tools
