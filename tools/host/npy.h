// NumPy .npy files (format versions 1-3): float32 and float16, little-endian, C order. The header
// is parsed as NumPy parses it (npy_header.h); only regular files are read, and never past the
// size the header implies. Anything else is refused with a message that says what the file holds
// and what is accepted.
#pragma once

#include <vkflash/device_info.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vkflash::tools {

struct NpyArray {
  DataType dtype = DataType::kFloat32;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;  // shape product * DataTypeSize(dtype) bytes, C order

  // The product of the shape; UINT64_MAX where it overflows (ReadNpy refuses such shapes).
  uint64_t element_count() const;
  // Element i as float (float16 is widened).
  float at(uint64_t i) const;
};

// The product of `shape`, or nullopt where it does not fit in 64 bits.
std::optional<uint64_t> CheckedElementCount(const std::vector<uint64_t>& shape);

// kIo when the file cannot be opened or read; kInvalidArgument when it is not a regular file or
// not a supported .npy.
Result<NpyArray> ReadNpy(const std::string& path);

// A mask or bias (AttentionParams::mask): float32, float16 or bool ('|b1', one byte per element).
struct NpyMask {
  MaskType type = MaskType::kNone;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;  // as stored: 4, 2 or 1 bytes per element, C order
};
Result<NpyMask> ReadNpyMask(const std::string& path);

// A one-dimensional int32 array (sequence lengths, offsets), read with the same checks.
Result<std::vector<int32_t>> ReadNpyInt32Vector(const std::string& path);

// Writes the whole file or returns an error (a partly written file is removed).
Status WriteNpy(const std::string& path, const NpyArray& array);

// An array of `shape` holding `values`, converted to `dtype`.
NpyArray MakeNpy(DataType dtype, std::vector<uint64_t> shape, const std::vector<float>& values);

}  // namespace vkflash::tools
