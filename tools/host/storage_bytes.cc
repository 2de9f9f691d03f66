#include "storage_bytes.h"

#include <cstring>

#include "half.h"

namespace vkflash::tools {

float LoadElement(const uint8_t* bytes, DataType dtype) {
  if (dtype == DataType::kFloat16) {
    uint16_t h;
    std::memcpy(&h, bytes, sizeof(h));
    return HalfToFloat(h);
  }
  float f;
  std::memcpy(&f, bytes, sizeof(f));
  return f;
}

void StoreElement(uint8_t* bytes, float value, DataType dtype) {
  if (dtype == DataType::kFloat16) {
    const uint16_t h = FloatToHalf(value);
    std::memcpy(bytes, &h, sizeof(h));
  } else {
    std::memcpy(bytes, &value, sizeof(value));
  }
}

std::vector<uint8_t> PackTensor(const std::vector<float>& values, DataType dtype) {
  const size_t size = DataTypeSize(dtype);
  std::vector<uint8_t> bytes(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) StoreElement(bytes.data() + i * size, values[i], dtype);
  return bytes;
}

std::vector<uint8_t> PackMask(const std::vector<float>& values, MaskType type) {
  std::vector<uint8_t> bytes;
  if (type == MaskType::kBool) {
    for (float x : values) bytes.push_back(x != 0.0f ? 1 : 0);
  } else if (type != MaskType::kNone) {
    bytes = PackTensor(values, type == MaskType::kFloat16 ? DataType::kFloat16 : DataType::kFloat32);
  }
  bytes.resize((bytes.size() + 3) / 4 * 4, 0);
  return bytes;
}

std::vector<float> UnpackTensor(const std::vector<uint8_t>& bytes, DataType dtype) {
  const size_t size = DataTypeSize(dtype);
  std::vector<float> values(bytes.size() / size);
  for (size_t i = 0; i < values.size(); ++i) values[i] = LoadElement(bytes.data() + i * size, dtype);
  return values;
}

}  // namespace vkflash::tools
