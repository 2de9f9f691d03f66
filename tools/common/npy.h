// NumPy .npy files (format versions 1-3): float32 and float16, little-endian, C order. Anything
// else is refused with a message that says what the file holds and what is accepted.
#pragma once

#include <vkflash/vkflash.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace vkflash::tools {

struct NpyArray {
  DataType dtype = DataType::kFloat32;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;  // shape product * DataTypeSize(dtype) bytes, C order

  uint64_t element_count() const;
  // Element i as float (float16 is widened).
  float at(uint64_t i) const;
};

// kIo when the file cannot be opened; kInvalidArgument when it is not a supported .npy.
Result<NpyArray> ReadNpy(const std::string& path);

// Writes the whole file or returns an error (a partly written file is removed).
Status WriteNpy(const std::string& path, const NpyArray& array);

// An array of `shape` holding `values`, converted to `dtype`.
NpyArray MakeNpy(DataType dtype, std::vector<uint64_t> shape, const std::vector<float>& values);

}  // namespace vkflash::tools
