#include "npy.h"

#include <cstdio>
#include <cstring>
#include <limits>

#include "npy_header.h"
#include "storage_bytes.h"
#include "util/regular_file.h"

namespace vkflash::tools {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
// NumPy refuses to load a header longer than this (format.py's _MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 10000;

Status Invalid(const std::string& path, const std::string& why) {
  return Status::Error(ErrorCode::kInvalidArgument, "'" + path + "' is not a usable .npy file: " + why);
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// The storage type of a descr NumPy reads as little-endian float32 or float16: a byte order of
// '<', '=' or '|' (or none: native, and every device vkflash runs on is little-endian), then the
// type code. Anything else, big-endian included, is not supported.
bool DescrDtype(const std::string& descr, DataType* dtype) {
  std::string code = descr;
  if (!code.empty() && (code[0] == '<' || code[0] == '=' || code[0] == '|')) code.erase(0, 1);
  if (code == "f4" || code == "f") {
    *dtype = DataType::kFloat32;
    return true;
  }
  if (code == "f2" || code == "e") {
    *dtype = DataType::kFloat16;
    return true;
  }
  return false;
}

}  // namespace

std::optional<uint64_t> CheckedElementCount(const std::vector<uint64_t>& shape) {
  uint64_t count = 1;
  for (uint64_t d : shape) {
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() / d) {
      // Overflow, unless a later dimension is 0 (then the array is empty).
      for (uint64_t e : shape) {
        if (e == 0) return 0;
      }
      return std::nullopt;
    }
    count *= d;
  }
  return count;
}

uint64_t NpyArray::element_count() const {
  return CheckedElementCount(shape).value_or(std::numeric_limits<uint64_t>::max());
}

float NpyArray::at(uint64_t i) const { return LoadElement(data.data() + i * DataTypeSize(dtype), dtype); }

namespace {

// The header and data of a .npy file whose descr `element_of` accepts: it returns the element
// size in bytes (0: refused) and names what is accepted in `accepted`.
template <typename ElementOf>
Result<std::pair<std::vector<uint64_t>, std::vector<uint8_t>>> ReadNpyData(const std::string& path, ElementOf element_of,
                                                                           const char* accepted) {
  auto opened = RegularFile::Open(path);
  if (!opened.ok()) return opened.status();
  RegularFile& file = *opened;

  uint8_t preamble[8];
  if (file.size() < sizeof(preamble) || !file.ReadNext(preamble, sizeof(preamble)).ok() ||
      std::memcmp(preamble, kMagic, kMagicBytes) != 0) {
    return Invalid(path, "no NumPy magic string");
  }
  const int major = preamble[6], minor = preamble[7];
  if (major < 1 || major > 3 || minor != 0) {
    return Invalid(path, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                             " is not 1.0, 2.0 or 3.0");
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  uint8_t length[4] = {};
  if (!file.ReadNext(length, length_bytes).ok()) return Invalid(path, "truncated header");
  const uint64_t header_bytes = uint64_t(length[0]) | uint64_t(length[1]) << 8 | uint64_t(length[2]) << 16 |
                                uint64_t(length[3]) << 24;
  const uint64_t data_start = 8 + length_bytes + header_bytes;
  if (data_start > file.size()) return Invalid(path, "truncated header (it runs past the end of the file)");
  if (header_bytes > kMaxHeaderBytes) {
    return Invalid(path, "a header of " + std::to_string(header_bytes) + " bytes (NumPy reads at most " +
                             std::to_string(kMaxHeaderBytes) + ")");
  }
  std::string text(header_bytes, '\0');
  if (!file.ReadNext(text.data(), header_bytes).ok()) return Invalid(path, "truncated header");
  auto header = ParseNpyHeader(text, major);
  if (!header.ok()) return Invalid(path, header.status().message());

  std::pair<std::vector<uint64_t>, std::vector<uint8_t>> array;
  array.first = header->shape;
  const uint64_t element_bytes = element_of(header->descr);
  if (element_bytes == 0) {
    return Invalid(path, "dtype '" + header->descr + "' is not supported (" + accepted + " only)");
  }
  const std::optional<uint64_t> count = CheckedElementCount(array.first);
  if (!count || *count > std::numeric_limits<uint64_t>::max() / element_bytes) {
    return Invalid(path, "shape " + ShapeText(array.first) + " has more elements than can be addressed");
  }
  // Fortran order lays out an array with at most one dimension above 1 exactly as C order does.
  uint64_t long_dimensions = 0;
  for (uint64_t d : array.first) long_dimensions += d > 1;
  if (header->fortran_order && long_dimensions > 1) {
    return Invalid(path, "Fortran-ordered arrays are not supported (use C order)");
  }
  // Like np.load, the data is exactly what the header implies: bytes after it are not read.
  const uint64_t data_bytes = *count * element_bytes;
  if (file.size() - data_start < data_bytes) {
    return Invalid(path, "holds " + std::to_string(file.size() - data_start) + " data bytes, shape " +
                             ShapeText(array.first) + " needs " + std::to_string(data_bytes));
  }
  array.second.resize(data_bytes);
  if (Status read = file.ReadNext(array.second.data(), data_bytes); !read.ok()) return read;
  return array;
}

}  // namespace

Result<NpyArray> ReadNpy(const std::string& path) {
  NpyArray array;
  auto read = ReadNpyData(
      path, [&](const std::string& descr) { return DescrDtype(descr, &array.dtype) ? DataTypeSize(array.dtype) : 0; },
      "float32 '<f4' or float16 '<f2'");
  if (!read.ok()) return read.status();
  array.shape = std::move(read->first);
  array.data = std::move(read->second);
  return array;
}

Result<NpyMask> ReadNpyMask(const std::string& path) {
  NpyMask mask;
  auto read = ReadNpyData(
      path,
      [&](const std::string& descr) -> uint64_t {
        DataType dtype;
        if (DescrDtype(descr, &dtype)) {
          mask.type = dtype == DataType::kFloat16 ? MaskType::kFloat16 : MaskType::kFloat32;
          return DataTypeSize(dtype);
        }
        std::string code = descr;
        if (!code.empty() && (code[0] == '<' || code[0] == '=' || code[0] == '|')) code.erase(0, 1);
        if (code != "b1" && code != "?") return 0;
        mask.type = MaskType::kBool;
        return 1;
      },
      "float32 '<f4', float16 '<f2' or bool '|b1'");
  if (!read.ok()) return read.status();
  mask.shape = std::move(read->first);
  mask.data = std::move(read->second);
  return mask;
}

Result<std::vector<int32_t>> ReadNpyInt32Vector(const std::string& path) {
  auto read = ReadNpyData(
      path,
      [](const std::string& descr) -> uint64_t {
        std::string code = descr;
        if (!code.empty() && (code[0] == '<' || code[0] == '=' || code[0] == '|')) code.erase(0, 1);
        return code == "i4" || code == "i" ? 4 : 0;
      },
      "int32 '<i4'");
  if (!read.ok()) return read.status();
  if (read->first.size() != 1) {
    return Invalid(path, "has shape " + ShapeText(read->first) + "; expected one dimension");
  }
  std::vector<int32_t> values(read->first[0]);
  std::memcpy(values.data(), read->second.data(), values.size() * sizeof(int32_t));
  return values;
}

Status WriteNpy(const std::string& path, const NpyArray& array) {
  std::string header = std::string("{'descr': '") + (array.dtype == DataType::kFloat16 ? "<f2" : "<f4") +
                       "', 'fortran_order': False, 'shape': " + ShapeText(array.shape) + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64.
  const size_t unpadded = kMagicBytes + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';

  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return Status::Error(ErrorCode::kIo, "cannot create '" + path + "'");
  const uint8_t preamble[4] = {1, 0, uint8_t(header.size() & 0xff), uint8_t(header.size() >> 8)};
  bool ok = std::fwrite(kMagic, 1, kMagicBytes, file) == kMagicBytes && std::fwrite(preamble, 1, 4, file) == 4 &&
            std::fwrite(header.data(), 1, header.size(), file) == header.size() &&
            (array.data.empty() || std::fwrite(array.data.data(), 1, array.data.size(), file) == array.data.size());
  ok = std::fclose(file) == 0 && ok;
  if (!ok) {
    std::remove(path.c_str());
    return Status::Error(ErrorCode::kIo, "cannot write '" + path + "'");
  }
  return Status::Ok();
}

NpyArray MakeNpy(DataType dtype, std::vector<uint64_t> shape, const std::vector<float>& values) {
  NpyArray array;
  array.dtype = dtype;
  array.shape = std::move(shape);
  array.data = PackTensor(values, dtype);
  return array;
}

}  // namespace vkflash::tools
