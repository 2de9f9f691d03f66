// .npy reading/writing and float16 conversion (host code the CLI relies on).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "half.h"
#include "npy.h"

using namespace vkflash;
using namespace vkflash::tools;

namespace {

void WriteText(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// A .npy v1 file with the given header dict and `data_bytes` zero bytes of data.
std::string NpyBytes(const std::string& dict, size_t data_bytes) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header + std::string(data_bytes, '\0');
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
  auto expect_refused = [&](const std::string& bytes, const std::string& needle) {
    WriteText(path, bytes);
    auto read = ReadNpy(path);
    REQUIRE_FALSE(read.ok());
    CHECK(read.status().code() == ErrorCode::kInvalidArgument);
    INFO(read.status().message());
    CHECK(read.status().message().find(needle) != std::string::npos);
  };
  expect_refused("not a numpy file at all", "magic");
  expect_refused(NpyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16), "<f8");
  expect_refused(NpyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8), ">f4");
  expect_refused(NpyBytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8), "<i4");
  expect_refused(NpyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16), "Fortran");
  expect_refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20), "data bytes");
  expect_refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28), "data bytes");
  expect_refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 8), "shape");
  expect_refused(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24).substr(0, 40), "truncated");

  auto ok = [&](const std::string& bytes, std::vector<uint64_t> shape) {
    WriteText(path, bytes);
    auto read = ReadNpy(path);
    INFO(read.status().ToString());
    REQUIRE(read.ok());
    CHECK(read->shape == shape);
  };
  ok(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 20), {5});
  ok(NpyBytes("{'descr': '<f2', 'fortran_order': False, 'shape': (), }", 2), {});
  ok(NpyBytes("{'descr': '<f2', 'fortran_order': False, 'shape': (1, 0, 3, 4), }", 0), {1, 0, 3, 4});

  auto missing = ReadNpy("vkflash_test_no_such_file.npy");
  CHECK(missing.status().code() == ErrorCode::kIo);
  std::remove(path.c_str());
}
