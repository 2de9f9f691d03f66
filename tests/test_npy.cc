// .npy reading/writing and float16 conversion (host code the CLI relies on).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "half.h"
#include "npy.h"
#include "storage_bytes.h"

using namespace vkflash;
using namespace vkflash::tools;

namespace {

void WriteText(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// A .npy file of format `version` (1, 2 or 3) with the given header dict and `data_bytes` zero
// bytes of data.
std::string NpyBytes(const std::string& dict, size_t data_bytes, int version = 1) {
  const size_t length_bytes = version == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + length_bytes + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + char(version) + '\0';
  for (size_t i = 0; i < length_bytes; ++i) out += char((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

// Writes `bytes` to `path` and requires ReadNpy to refuse it with kInvalidArgument, naming `needle`.
void RequireRefused(const std::string& path, const std::string& bytes, const std::string& needle) {
  WriteText(path, bytes);
  auto read = ReadNpy(path);
  INFO(bytes.substr(0, 130));
  REQUIRE_FALSE(read.ok());
  CHECK(read.status().code() == ErrorCode::kInvalidArgument);
  INFO(read.status().message());
  CHECK(read.status().message().find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("float16 conversion round-trips every half value and rounds to nearest even", "[npy][half]") {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = uint16_t(bits);
    const float f = HalfToFloat(h);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(HalfToFloat(FloatToHalf(f))));
    } else {
      REQUIRE(FloatToHalf(f) == h);
    }
  }
  CHECK(FloatToHalf(1.0f) == 0x3c00);
  CHECK(FloatToHalf(65504.0f) == 0x7bff);
  CHECK(FloatToHalf(65520.0f) == 0x7c00);                  // rounds up to inf
  CHECK(FloatToHalf(1.0f + 1.0f / 2048.0f) == 0x3c00);     // tie, to even
  CHECK(FloatToHalf(1.0f + 3.0f / 2048.0f) == 0x3c02);     // tie, to even (up)
  CHECK(FloatToHalf(std::ldexp(1.0f, -24)) == 0x0001);     // smallest subnormal
  CHECK(FloatToHalf(std::ldexp(1.0f, -26)) == 0x0000);     // below half of it
}

TEST_CASE("a mask's values packed as its buffer holds them, in whole words", "[npy][half]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> bias = {1.5f, -inf, 0.0f, -2.0f, 65504.0f};
  const std::vector<uint8_t> f32 = tools::PackMask(bias, MaskType::kFloat32);
  REQUIRE(f32.size() == 20);
  for (size_t i = 0; i < bias.size(); ++i) {
    float x;
    std::memcpy(&x, &f32[i * 4], 4);
    CHECK(x == bias[i]);
  }
  const std::vector<uint8_t> f16 = tools::PackMask(bias, MaskType::kFloat16);
  REQUIRE(f16.size() == 12);  // 10 bytes, padded to whole words with zeros
  const uint16_t halves[] = {0x3e00, 0xfc00, 0x0000, 0xc000, 0x7bff, 0x0000};
  for (size_t i = 0; i < 6; ++i) {
    uint16_t h;
    std::memcpy(&h, &f16[i * 2], 2);
    CHECK(h == halves[i]);
  }
  // bool: 0 blocks; one byte per value.
  const std::vector<uint8_t> boolean = tools::PackMask({1.0f, 0.0f, 1.0f, 1.0f, 0.0f}, MaskType::kBool);
  CHECK(boolean == std::vector<uint8_t>{1, 0, 1, 1, 0, 0, 0, 0});
  CHECK(tools::PackMask({}, MaskType::kBool).empty());
}

TEST_CASE(".npy files round-trip in both dtypes", "[npy]") {
  const std::string path = "vkflash_test_roundtrip.npy";
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    const std::vector<float> values = {1.5f, -2.0f, 0.25f, 3.0f, 0.0f, -0.5f};
    REQUIRE(WriteNpy(path, MakeNpy(dtype, {1, 2, 3}, values)).ok());
    auto read = ReadNpy(path);
    REQUIRE(read.ok());
    CHECK(read->dtype == dtype);
    CHECK(read->shape == std::vector<uint64_t>{1, 2, 3});
    for (size_t i = 0; i < values.size(); ++i) CHECK(read->at(i) == values[i]);
  }
  std::remove(path.c_str());
}

TEST_CASE(".npy reader refuses what it cannot use, saying why", "[npy]") {
  const std::string path = "vkflash_test_bad.npy";
  auto expect_refused = [&](const std::string& bytes, const std::string& needle) { RequireRefused(path, bytes, needle); };
  expect_refused("not a numpy file at all", "magic");
  expect_refused(NpyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16), "<f8");
  expect_refused(NpyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8), ">f4");
  expect_refused(NpyBytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8), "<i4");
  expect_refused(NpyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16), "Fortran");
  expect_refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20), "data bytes");
  expect_refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 8), "not a Python literal");
  expect_refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24).substr(0, 40), "truncated");

  auto ok = [&](const std::string& bytes, std::vector<uint64_t> shape) {
    WriteText(path, bytes);
    auto read = ReadNpy(path);
    INFO(read.status().ToString());
    REQUIRE(read.ok());
    CHECK(read->shape == shape);
  };
  ok(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 20), {5});
  // Bytes after the data are not read, as np.load does not read them.
  ok(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28), {2, 3});
  CHECK(ReadNpy(path)->data.size() == 24);
  ok(NpyBytes("{'descr': '<f2', 'fortran_order': False, 'shape': (), }", 2), {});
  ok(NpyBytes("{'descr': '<f2', 'fortran_order': False, 'shape': (1, 0, 3, 4), }", 0), {1, 0, 3, 4});

  auto missing = ReadNpy("vkflash_test_no_such_file.npy");
  CHECK(missing.status().code() == ErrorCode::kIo);
  std::remove(path.c_str());
}

TEST_CASE(".npy header is parsed as NumPy parses it, not searched", "[npy]") {
  const std::string path = "vkflash_test_header.npy";
  auto read = [&](const std::string& bytes) {
    WriteText(path, bytes);
    return ReadNpy(path);
  };
  auto refused = [&](const std::string& bytes, const std::string& needle) { RequireRefused(path, bytes, needle); };
  // A key inside another key's string value is text, not a key: NumPy refuses the unknown key.
  refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 16, 32), "
                   "'note': \"'shape': (1, 1, 32, 32)\"}", 1 * 2 * 16 * 32 * 4),
          "'note'");
  refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}", 8), "repeats");
  refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", 8), "after its dict");
  refused(NpyBytes("{'descr': '<f4', 'fortran_order': False}", 8), "lacks the key 'shape'");
  refused(NpyBytes("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", 8), "fortran_order");
  refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': 2}", 8), "not a tuple");
  refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1)}", 8), "negative");
  refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8), "not a Python literal");
  refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': '\xff\xfe'}", 8, 3), "UTF-8");
  refused(NpyBytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8), "structured");
  refused(NpyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}", 8), ">f4");
  // The header length field claims more bytes than the file holds.
  std::string long_header = NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8);
  long_header[8] = char(0xff), long_header[9] = char(0x7f);
  refused(long_header, "truncated header");

  auto accepted = [&](const std::string& bytes, std::vector<uint64_t> shape, DataType dtype) {
    auto r = read(bytes);
    INFO(bytes.substr(10, 120));
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    CHECK(r->shape == shape);
    CHECK(r->dtype == dtype);
  };
  // A string value that looks like a key changes nothing (here: descr spelled with quotes).
  accepted(NpyBytes("{\"shape\": (3, 2), 'fortran_order': False, \"descr\": '<f4'}", 24), {3, 2}, DataType::kFloat32);
  accepted(NpyBytes("{'descr':'<f2','fortran_order':False,'shape':(4,)}", 8), {4}, DataType::kFloat16);
  accepted(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, 2), {2, 3}, DataType::kFloat32);
  accepted(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, 3), {2, 3}, DataType::kFloat32);
  accepted(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", 24), {2, 3}, DataType::kFloat32);
  accepted(NpyBytes("{'descr': '=f4', 'fortran_order': False, 'shape': (1_0,), }", 40), {10}, DataType::kFloat32);
  accepted(NpyBytes("{'descr': 'e', 'fortran_order': True, 'shape': (1, 5, 1), }", 10), {1, 5, 1}, DataType::kFloat16);
  std::remove(path.c_str());
}

TEST_CASE(".npy reader refuses shapes whose size overflows, and reads only regular files", "[npy]") {
  const std::string path = "vkflash_test_overflow.npy";
  // 2^30 x 2^16 x 2^16 x 64 elements: 2^68, which wraps to 0 in 64 bits.
  WriteText(path, NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 65536, 65536, 64), }", 0));
  auto r = ReadNpy(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("more elements than can be addressed") != std::string::npos);
  WriteText(path, NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (5, 107367629, 536903681, 64), }", 0));
  CHECK_FALSE(ReadNpy(path).ok());
  // A zero dimension makes an empty array, however large the others.
  WriteText(path, NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 65536, 65536, 0), }", 0));
  CHECK(ReadNpy(path).ok());
  std::remove(path.c_str());

  auto directory = ReadNpy(".");
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.status().message().find("directory") != std::string::npos);
  auto device = ReadNpy("/dev/zero");  // endless: must be refused, not read
  REQUIRE_FALSE(device.ok());
  CHECK(device.status().message().find("not a regular file") != std::string::npos);
  CHECK(CheckedElementCount({1u << 31, 1u << 31, 1u << 31}) == std::nullopt);
  CHECK(CheckedElementCount({3, 5}) == 15u);
}

