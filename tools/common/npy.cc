#include "npy.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "storage_bytes.h"

namespace vkflash::tools {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

Status Invalid(const std::string& path, const std::string& why) {
  return Status::Error(ErrorCode::kInvalidArgument, "'" + path + "' is not a usable .npy file: " + why);
}

std::string Trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

// The text of the value of `key` in the header's Python dict literal: from after the colon to
// the next ',' or '}' outside parentheses.
bool DictValue(const std::string& header, const std::string& key, std::string* value) {
  size_t pos = header.find("'" + key + "'");
  if (pos == std::string::npos) return false;
  pos = header.find(':', pos);
  if (pos == std::string::npos) return false;
  ++pos;
  int depth = 0;
  size_t end = pos;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    else if (c == ')') --depth;
    else if (depth == 0 && (c == ',' || c == '}')) break;
  }
  if (depth != 0 || end == header.size()) return false;
  *value = Trim(header.substr(pos, end - pos));
  return true;
}

// "(2, 3, 4)" / "(5,)" / "()" -> dims.
bool ParseShape(const std::string& text, std::vector<uint64_t>* shape) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return false;
  const std::string inner = Trim(text.substr(1, text.size() - 2));
  if (inner.empty()) return true;  // a 0-d array
  std::vector<std::string> items;
  size_t pos = 0;
  for (size_t comma; (comma = inner.find(',', pos)) != std::string::npos; pos = comma + 1) {
    items.push_back(Trim(inner.substr(pos, comma - pos)));
  }
  items.push_back(Trim(inner.substr(pos)));
  if (items.back().empty() && items.size() > 1) items.pop_back();  // the trailing comma of "(5,)"
  for (const std::string& item : items) {
    if (item.empty() || item.size() > 15 || item.find_first_not_of("0123456789") != std::string::npos) return false;
    shape->push_back(std::stoull(item));
  }
  return true;
}

}  // namespace

uint64_t NpyArray::element_count() const {
  uint64_t count = 1;
  for (uint64_t d : shape) count *= d;
  return count;
}

float NpyArray::at(uint64_t i) const { return LoadElement(data.data() + i * DataTypeSize(dtype), dtype); }

Result<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status::Error(ErrorCode::kIo, "cannot open '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) return Status::Error(ErrorCode::kIo, "cannot read '" + path + "'");

  if (bytes.size() < kMagicBytes + 4 || std::memcmp(bytes.data(), kMagic, kMagicBytes) != 0) {
    return Invalid(path, "no NumPy magic string");
  }
  const uint8_t major = bytes[6];
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Invalid(path, "truncated header");
    header_len = size_t(bytes[8]) | size_t(bytes[9]) << 8 | size_t(bytes[10]) << 16 | size_t(bytes[11]) << 24;
    header_start = 12;
  } else {
    return Invalid(path, "format version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  if (header_start + header_len > bytes.size()) return Invalid(path, "truncated header");
  const std::string header(reinterpret_cast<const char*>(bytes.data() + header_start), header_len);

  std::string descr, fortran, shape_text;
  if (!DictValue(header, "descr", &descr) || !DictValue(header, "fortran_order", &fortran) ||
      !DictValue(header, "shape", &shape_text)) {
    return Invalid(path, "header lacks descr, fortran_order or shape");
  }
  NpyArray array;
  if (descr == "'<f4'") {
    array.dtype = DataType::kFloat32;
  } else if (descr == "'<f2'") {
    array.dtype = DataType::kFloat16;
  } else {
    return Invalid(path, "dtype " + descr + " is not supported (float32 '<f4' or float16 '<f2' only)");
  }
  if (fortran != "False") return Invalid(path, "Fortran-ordered arrays are not supported (use C order)");
  if (!ParseShape(shape_text, &array.shape)) return Invalid(path, "cannot parse shape " + shape_text);

  const uint64_t data_bytes = array.element_count() * DataTypeSize(array.dtype);
  const size_t data_start = header_start + header_len;
  if (bytes.size() - data_start != data_bytes) {
    return Invalid(path, "holds " + std::to_string(bytes.size() - data_start) + " data bytes, shape " + shape_text +
                             " needs " + std::to_string(data_bytes));
  }
  array.data.assign(bytes.begin() + std::ptrdiff_t(data_start), bytes.end());
  return array;
}

Status WriteNpy(const std::string& path, const NpyArray& array) {
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) shape += std::to_string(array.shape[i]) + ", ";
  if (array.shape.size() > 1) shape.resize(shape.size() - 2);
  else if (array.shape.size() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = std::string("{'descr': '") + (array.dtype == DataType::kFloat16 ? "<f2" : "<f4") +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64.
  const size_t unpadded = kMagicBytes + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return Status::Error(ErrorCode::kIo, "cannot create '" + path + "'");
  const uint8_t preamble[4] = {1, 0, uint8_t(header.size() & 0xff), uint8_t(header.size() >> 8)};
  file.write(kMagic, kMagicBytes);
  file.write(reinterpret_cast<const char*>(preamble), 4);
  file.write(header.data(), std::streamsize(header.size()));
  file.write(reinterpret_cast<const char*>(array.data.data()), std::streamsize(array.data.size()));
  file.close();
  if (!file) {
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
