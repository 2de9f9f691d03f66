// The tensor-core path's host side, which CI (lavapipe, no cooperative matrices) can check:
// the accumulator-layout analysis on synthetic probe outputs, and the kernel-family choice.
// The kernels themselves run in the forward/backward tests on devices that have them.
#include <catch2/catch.hpp>

#include <functional>
#include <vector>

#include "attention/coopmat_layout.h"
#include "common/shader_interface.h"
#include "support/validated_context.h"

using vkflash::attention::AnalyzeCoopmatProbe;

namespace {

// A probe output for `lanes` lanes of `elements` each, element i of lane l at (row, col).
std::vector<float> Probe(uint32_t lanes, uint32_t elements, const std::function<std::pair<int, int>(int, int)>& at) {
  std::vector<float> out(size_t(lanes) * VKF_PROBE_STRIDE, -1.0f);
  for (uint32_t l = 0; l < lanes; ++l) {
    for (uint32_t i = 0; i < elements; ++i) {
      auto [r, c] = at(int(l), int(i));
      out[l * VKF_PROBE_STRIDE + i] = float(16 * r + c);
    }
    out[l * VKF_PROBE_STRIDE + VKF_PROBE_STRIDE - 1] = float(elements);
  }
  return out;
}

// NVIDIA's mma.m16n8k16 accumulator, twice along columns: quads of lanes share two rows.
std::pair<int, int> NvidiaLike(int lane, int i) { return {lane / 4 + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * (lane % 4) + i % 2}; }

}  // namespace

TEST_CASE("cooperative-matrix layout analysis accepts row-structured layouts") {
  SECTION("NVIDIA-like: 2 rows per lane, 4 lanes per row") {
    auto layout = AnalyzeCoopmatProbe(Probe(32, 8, NvidiaLike), 32);
    REQUIRE(layout.ok());
    CHECK(layout->elements_per_lane == 8);
    CHECK(layout->rows_per_lane == 2);
    CHECK(layout->row_lane_mask == 3u);
    // elements 0,1,4,5 -> slot 0 (row lane/4), 2,3,6,7 -> slot 1 (row lane/4 + 8)
    CHECK(layout->slots_lo == 0x11001100u);
    CHECK(layout->slots_hi == 0u);
  }
  SECTION("as the H100 reported it: elements 0-3 in one row, 4-7 eight rows down") {
    auto layout = AnalyzeCoopmatProbe(
        Probe(32, 8, [](int l, int i) { return std::pair{l / 4 + 8 * (i / 4), 8 * ((i / 2) % 2) + 2 * (l % 4) + i % 2}; }), 32);
    REQUIRE(layout.ok());
    CHECK(layout->rows_per_lane == 2);
    CHECK(layout->row_lane_mask == 3u);
    CHECK(layout->slots_lo == 0x11110000u);
  }
  SECTION("AMD-like wave32: a column per lane, 8 rows per lane, 16 lanes per row") {
    auto layout = AnalyzeCoopmatProbe(Probe(32, 8, [](int l, int i) { return std::pair{2 * i + l / 16, l % 16}; }), 32);
    REQUIRE(layout.ok());
    CHECK(layout->rows_per_lane == 8);
    CHECK(layout->row_lane_mask == 15u);
    CHECK(layout->slots_lo == 0x76543210u);
  }
  SECTION("subgroup of 16: 16 elements, whole row per lane") {
    auto layout = AnalyzeCoopmatProbe(Probe(16, 16, [](int l, int i) { return std::pair{l, i}; }), 16);
    REQUIRE(layout.ok());
    CHECK(layout->rows_per_lane == 1);
    CHECK(layout->row_lane_mask == 0u);
    CHECK(layout->slots_lo == 0u);
    CHECK(layout->slots_hi == 0u);
  }
}

TEST_CASE("cooperative-matrix layout analysis rejects what the kernels cannot reduce") {
  SECTION("an element held twice") {
    auto probe = Probe(32, 8, NvidiaLike);
    probe[1] = probe[0];
    CHECK(AnalyzeCoopmatProbe(probe, 32).status().code() == vkflash::ErrorCode::kUnsupported);
  }
  SECTION("lanes that group their rows differently") {
    // Odd lanes swap elements 1 and 2: element 1 then belongs to the other row.
    auto probe = Probe(32, 8, [](int l, int i) { return NvidiaLike(l, (l % 2 && (i == 1 || i == 2)) ? 3 - i : i); });
    CHECK_FALSE(AnalyzeCoopmatProbe(probe, 32).ok());
  }
  SECTION("rows spread over lanes that are not an xor group") {
    // Lanes {0, 1, 2, 3} hold row 0 in lane 0 but rows rotate with the lane afterwards.
    auto probe = Probe(32, 8, [](int l, int i) { return std::pair{(l / 4 + 8 * ((i / 2) % 2) + (l % 4 == 3)) % 16, 8 * (i / 4) + 2 * (l % 4) + i % 2}; });
    CHECK_FALSE(AnalyzeCoopmatProbe(probe, 32).ok());
  }
  SECTION("a wrong element count") {
    auto probe = Probe(32, 8, NvidiaLike);
    probe[VKF_PROBE_STRIDE - 1] = 7.0f;
    CHECK_FALSE(AnalyzeCoopmatProbe(probe, 32).ok());
    CHECK_FALSE(AnalyzeCoopmatProbe(std::vector<float>(10, 0.0f), 32).ok());
  }
}

TEST_CASE("kernel family: scalar always works, coopmat only where the device has it") {
  auto make = [](const char* kernels) {
    vkflash::ContextOptions options = vkflash::testing::ValidatedOptions();
    options.kernels = kernels;
    return vkflash::Context::Create(options);
  };
  auto scalar = make("scalar");
  REQUIRE(scalar.ok());
  CHECK((*scalar)->device_info().cooperative_matrix == vkflash::CooperativeMatrixApi::kNone);

  auto bad = make("tensor");
  CHECK(bad.status().code() == vkflash::ErrorCode::kInvalidArgument);

  auto automatic = make("auto");
  REQUIRE(automatic.ok());
  const vkflash::DeviceInfo& info = (*automatic)->device_info();
  auto coopmat = make("coopmat");
  if (info.cooperative_matrix == vkflash::CooperativeMatrixApi::kNone) {
    CHECK(coopmat.status().code() == vkflash::ErrorCode::kUnsupported);
  } else {
    REQUIRE(coopmat.ok());
    vkflash::AttentionParams params;
    params.dtype = vkflash::DataType::kFloat16;
    params.shape = {1, 2, 2, 100, 100, 64};
    auto choice = (*coopmat)->ChooseForwardKernel(params);
    REQUIRE(choice.ok());
    CHECK(choice->cooperative_matrix != vkflash::CooperativeMatrixApi::kNone);
    // Instrumented calls and float32 run the scalar kernel.
    CHECK((*coopmat)->ChooseForwardKernel(params, /*with_stats=*/true)->cooperative_matrix ==
          vkflash::CooperativeMatrixApi::kNone);
    params.dtype = vkflash::DataType::kFloat32;
    CHECK((*coopmat)->ChooseForwardKernel(params)->cooperative_matrix == vkflash::CooperativeMatrixApi::kNone);
  }
  vkflash::testing::RequireNoValidationMessages();
}
