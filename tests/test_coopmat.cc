// The tensor-core path's host side, which CI (lavapipe, no cooperative matrices) can check:
// the accumulator-layout analysis on synthetic probe outputs, the kernel-family choice, and the
// cooperative-matrix-2 tile choice on a synthetic device.
// The kernels themselves run in the forward/backward tests on devices that have them.
#include <catch2/catch.hpp>
#include <vkflash/diagnostics.hpp>

#include <functional>
#include <vector>

#include "attention/coopmat_layout.h"
#include "attention/backends/coopmat2_backend.h"
#include "attention/backends/coopmat_backend.h"
#include "attention/kernel_constants.h"
#include "attention/family_choice.h"
#include "attention/kernel_choice.h"
#include "common/shader_interface.h"
#include "support/validated_context.h"
#include "vulkan/shader_library.h"

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

// The probe's output with an A operand's block after the accumulator's (`a_elements` each).
using ElementAt = std::function<std::pair<int, int>(int, int)>;
std::vector<float> ProbeWithA(uint32_t lanes, uint32_t elements, const ElementAt& acc, uint32_t a_elements,
                              const ElementAt& a) {
  std::vector<float> out = Probe(lanes, elements, acc);
  const std::vector<float> a_block = Probe(lanes, a_elements, a);
  out.insert(out.end(), a_block.begin(), a_block.end());
  return out;
}

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

TEST_CASE("cooperative-matrix layout analysis: A operands laid out like the accumulator") {
  SECTION("the same element at every lane and index: an element copy converts") {
    auto layout = AnalyzeCoopmatProbe(ProbeWithA(32, 8, NvidiaLike, 8, NvidiaLike), 32);
    REQUIRE(layout.ok());
    CHECK(layout->a_like_accumulator);
  }
  SECTION("no A block in the output (an older probe)") {
    auto layout = AnalyzeCoopmatProbe(Probe(32, 8, NvidiaLike), 32);
    REQUIRE(layout.ok());
    CHECK_FALSE(layout->a_like_accumulator);
  }
  SECTION("the same elements in another order in one lane") {
    auto layout = AnalyzeCoopmatProbe(
        ProbeWithA(32, 8, NvidiaLike, 8, [](int l, int i) { return NvidiaLike(l, l == 31 && i < 2 ? 1 - i : i); }), 32);
    REQUIRE(layout.ok());  // the accumulator is fine: only the copy is ruled out
    CHECK_FALSE(layout->a_like_accumulator);
  }
  SECTION("A spread over the lanes another way (AMD-like: a row of A per lane pair)") {
    auto layout = AnalyzeCoopmatProbe(
        ProbeWithA(32, 8, [](int l, int i) { return std::pair{2 * i + l / 16, l % 16}; }, 8,
                   [](int l, int i) { return std::pair{l % 16, 8 * (l / 16) + i}; }),
        32);
    REQUIRE(layout.ok());
    CHECK_FALSE(layout->a_like_accumulator);
  }
  SECTION("A with another element count per lane") {
    auto layout = AnalyzeCoopmatProbe(ProbeWithA(32, 8, NvidiaLike, 4, NvidiaLike), 32);
    REQUIRE(layout.ok());
    CHECK_FALSE(layout->a_like_accumulator);
  }
  SECTION("A with more elements per lane, the first ones where the accumulator's are (replicated A)") {
    auto layout = AnalyzeCoopmatProbe(
        ProbeWithA(32, 8, NvidiaLike, 16, [](int l, int i) { return NvidiaLike(l, i % 8); }), 32);
    REQUIRE(layout.ok());
    CHECK_FALSE(layout->a_like_accumulator);
  }
  SECTION("the kernels' specialization constant follows the analysis") {
    vkflash::attention::CoopmatBackend backend;
    vkflash::KernelChoice choice;
    choice.subgroup_size = 32;
    for (bool alike : {false, true}) {
      vkflash::attention::CoopmatLayout layout;
      layout.a_like_accumulator = alike;
      vkflash::attention::SpecConstants spec{};
      backend.SetSpecConstants(choice, layout, &spec);
      CHECK(spec[VKF_SPEC_CM_A_LIKE_ACC] == (alike ? 1u : 0u));
    }
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
  vkflash::AttentionParams f16_params;  // a call every tensor-core family takes
  f16_params.dtype = vkflash::DataType::kFloat16;
  f16_params.shape = {1, 2, 2, 100, 100, 64};
  auto coopmat = make("coopmat");
  if (info.cooperative_matrix == vkflash::CooperativeMatrixApi::kNone && !info.use_cooperative_matrix2) {
    CHECK(coopmat.status().code() == vkflash::ErrorCode::kUnsupported);
  } else {
    REQUIRE(coopmat.ok());
    vkflash::AttentionParams params = f16_params;
    auto choice = (*coopmat)->ChooseForwardKernel(params);
    REQUIRE(choice.ok());
    CHECK(choice->cooperative_matrix != vkflash::CooperativeMatrixApi::kNone);
    // Instrumented calls and float32 run the scalar kernel.
    CHECK(vkflash::ChooseInstrumentedForwardKernel(**coopmat, params)->cooperative_matrix ==
          vkflash::CooperativeMatrixApi::kNone);
    params.dtype = vkflash::DataType::kFloat32;
    CHECK((*coopmat)->ChooseForwardKernel(params)->cooperative_matrix == vkflash::CooperativeMatrixApi::kNone);
  }

  // "coopmat2" exactly where "auto" picked the workgroup-scope kernels; they then run both passes.
  auto coopmat2 = make("coopmat2");
  if (!info.use_cooperative_matrix2) {
    CHECK(coopmat2.status().code() == vkflash::ErrorCode::kUnsupported);
  } else {
    REQUIRE(coopmat2.ok());
    CHECK((*coopmat2)->ChooseForwardKernel(f16_params)->cooperative_matrix == vkflash::CooperativeMatrixApi::kNv2);
    auto backward = (*coopmat2)->ChooseBackwardKernels(f16_params);
    REQUIRE(backward.ok());
    CHECK(backward->dkdv.kernel == "backward_dkdv_f16_coopmat2");
    CHECK(backward->dq.kernel == "backward_dq_f16_coopmat2");
  }
  vkflash::testing::RequireNoValidationMessages();
}

TEST_CASE("kernel family choice on a synthetic device: what each `kernels` value uses, or why it cannot") {
  using vkflash::CooperativeMatrixApi;
  using vkflash::attention::ChooseKernelFamily;
  // Which of the tensor-core kernels this build has (glslang 12 builds only the NV ones).
  const bool nv_built = vkflash::vk::FindShader("coopmat_probe_nv") != nullptr;
  const bool khr_built = vkflash::vk::FindShader("coopmat_probe_khr") != nullptr;
  const bool nv2_built = vkflash::vk::FindShader("forward_f16_coopmat2") != nullptr;
  vkflash::DeviceInfo device;
  device.name = "synthetic";
  device.use_cooperative_matrix2 = true;  // left over: every choice starts afresh
  device.cooperative_matrix = CooperativeMatrixApi::kKhr;
  auto uses = [&](CooperativeMatrixApi subgroup_scope, bool coopmat2) {
    return device.cooperative_matrix == subgroup_scope && device.use_cooperative_matrix2 == coopmat2;
  };
  auto refusal = [&](const char* kernels) { return ChooseKernelFamily(kernels, &device).message(); };

  REQUIRE(ChooseKernelFamily("auto", &device).ok());
  CHECK(uses(CooperativeMatrixApi::kNone, false));
  CHECK(device.cooperative_matrix_note == "no cooperative-matrix extension");
  CHECK(refusal("coopmat") == "kernels 'coopmat': no usable cooperative-matrix extension on 'synthetic'");
  CHECK(refusal("coopmat_nv") == "kernels 'coopmat_nv': VK_NV_cooperative_matrix kernels cannot run on 'synthetic'");
  CHECK(refusal("coopmat_khr") == "kernels 'coopmat_khr': VK_KHR_cooperative_matrix kernels cannot run on 'synthetic'");
  CHECK(refusal("coopmat2") == "kernels 'coopmat2': VK_NV_cooperative_matrix2 kernels cannot run on 'synthetic'");
  CHECK(refusal("decode") == "kernels 'decode': the decode kernels need subgroup operations on 'synthetic'");
  const vkflash::Status unknown = ChooseKernelFamily("tensor", &device);
  CHECK(unknown.code() == vkflash::ErrorCode::kInvalidArgument);
  CHECK(unknown.message() ==
        "kernels 'tensor': expected auto, coopmat, decode, coopmat2, coopmat_khr, coopmat_nv or scalar");
  CHECK(vkflash::KernelsOptionValues() ==
        std::vector<std::string>{"auto", "coopmat", "decode", "coopmat2", "coopmat_khr", "coopmat_nv", "scalar"});

  // Offered and able, but the portability knobs took subgroup operations away.
  device.nv_cooperative_matrix = device.nv_cooperative_matrix_f16 = true;
  device.khr_cooperative_matrix = device.khr_cooperative_matrix_f16 = true;
  REQUIRE(ChooseKernelFamily("auto", &device).ok());
  CHECK(uses(CooperativeMatrixApi::kNone, false));
  CHECK(device.cooperative_matrix_note == "the device lacks a feature the kernels need (or this build lacks them)");
  CHECK(refusal("coopmat_nv") == "kernels 'coopmat_nv': VK_NV_cooperative_matrix kernels need subgroup operations on 'synthetic'");
  CHECK(refusal("coopmat_khr") == "kernels 'coopmat_khr': VK_KHR_cooperative_matrix kernels need subgroup operations on 'synthetic'");

  device.use_subgroup_ops = true;
  CHECK(refusal("decode") == "kernels 'decode': the decode kernels need subgroup votes on 'synthetic'");
  device.subgroup_vote_in_compute = true;
  CHECK(refusal("decode") == "kernels 'decode': the decode kernels need storageBuffer16BitAccess on 'synthetic'");
  device.storage_buffer_16bit = true;
  REQUIRE(ChooseKernelFamily("decode", &device).ok());  // then every family after it
  CHECK(device.use_decode_kernels);
  device.nv_cooperative_matrix2 = device.nv_cooperative_matrix2_f16 = true;
  const CooperativeMatrixApi subgroup_scope =
      khr_built ? CooperativeMatrixApi::kKhr : nv_built ? CooperativeMatrixApi::kNv : CooperativeMatrixApi::kNone;
  REQUIRE(ChooseKernelFamily("auto", &device).ok());
  CHECK(uses(subgroup_scope, nv2_built));
  CHECK(device.use_decode_kernels);
  CHECK(ChooseKernelFamily("coopmat", &device).ok() == (nv_built || khr_built || nv2_built));
  REQUIRE(ChooseKernelFamily("scalar", &device).ok());
  CHECK(uses(CooperativeMatrixApi::kNone, false));
  CHECK_FALSE(device.use_decode_kernels);
  CHECK(device.cooperative_matrix_note == "scalar kernels asked for");
  if (nv_built) {
    REQUIRE(ChooseKernelFamily("coopmat_nv", &device).ok());  // only that family, then scalar
    CHECK(uses(CooperativeMatrixApi::kNv, false));
  }
  if (khr_built) {
    REQUIRE(ChooseKernelFamily("coopmat_khr", &device).ok());
    CHECK(uses(CooperativeMatrixApi::kKhr, false));
  } else {
    CHECK(refusal("coopmat_khr") ==
          "kernels 'coopmat_khr': this build has no VK_KHR_cooperative_matrix kernels (glslang >= 13 needed) on 'synthetic'");
  }
  if (nv2_built) {
    REQUIRE(ChooseKernelFamily("coopmat2", &device).ok());  // the subgroup-scope kernels take what it does not
    CHECK(uses(subgroup_scope, true));
  } else {
    CHECK(refusal("coopmat2") ==
          "kernels 'coopmat2': this build has no VK_NV_cooperative_matrix2 kernel (glslang >= 14 needed) on 'synthetic'");
  }
}

TEST_CASE("cooperative matrix 2 tiles follow the device's workgroup sizes and granularity") {
  // A device as the H100 describes itself, with only VK_NV_cooperative_matrix2 in use.
  vkflash::DeviceInfo device;
  device.max_workgroup_invocations = 1024;
  device.storage_buffer_16bit = true;
  device.usable_shared_memory_bytes = 49152;
  device.subgroup_size = device.min_subgroup_size = device.max_subgroup_size = 32;
  device.use_subgroup_ops = true;
  device.use_cooperative_matrix2 = true;
  device.cooperative_matrix2_granularity = 32;
  // workgroup size, then the M, N and K granularities there
  device.cooperative_matrix2_workgroups = {{32, 16, 16, 16}, {64, 16, 16, 16}, {128, 32, 16, 16}, {256, 32, 32, 16}};
  device.cooperative_matrix2_subgroup_granularity = 16;
  vkflash::AttentionParams params;
  params.dtype = vkflash::DataType::kFloat16;
  params.shape = {1, 2, 2, 1000, 1000, 128};

  auto forward = vkflash::attention::ChooseForwardKernel(device, params, /*scalar_only=*/false);
  REQUIRE(forward.ok());
  CHECK(forward->kernel == "forward_f16_coopmat2");
  CHECK(forward->cooperative_matrix == vkflash::CooperativeMatrixApi::kNv2);
  CHECK((forward->block_q == 64 && forward->block_kv == 64 && forward->workgroup_size == 128));
  CHECK(forward->matrix_granularity == 32);  // the width of the kernel's row vectors
  const uint32_t flag = 4;  // the kernels' uint non-finite flag (forward, dK/dV)
  const uint32_t closed_tiles = 33 * 4;  // the mask's closed tiles of the loop, and the first's index (forward, dK/dV)
  CHECK(forward->shared_memory_bytes == 2 * 64 * (128 + 8) * 2 + flag + closed_tiles);  // K and V rows, padded by 16 bytes
  auto backward = vkflash::attention::ChooseBackwardKernels(device, params, /*scalar_only=*/false);
  REQUIRE(backward.ok());
  // The backward: subgroup-scope matrices, 16 owned rows per subgroup.
  const uint32_t row_bytes = (128 + 8) * 2;  // a padded shared row
  CHECK((backward->dkdv.block_kv == 64 && backward->dkdv.block_q == 48 && backward->dkdv.workgroup_size == 128));
  // V rows; K rows, then Q and dO rows (2 x 48, the larger); the step's LSE, delta and non-finite steps
  CHECK(backward->dkdv.shared_memory_bytes == (64 + 2 * 48) * row_bytes + 3 * 48 * 4 + flag + closed_tiles);
  CHECK((backward->dq.block_q == 64 && backward->dq.block_kv == 64 && backward->dq.workgroup_size == 128));
  // K and V rows and their non-finite steps; the owned rows' LSE and delta
  CHECK(backward->dq.shared_memory_bytes == 2 * 64 * row_bytes + 64 * 4 + 2 * 64 * 4);
  CHECK((backward->dkdv.matrix_granularity == 16 && backward->dq.matrix_granularity == 16));

  SECTION("stored dS (deterministic = false): its own tiles, none larger than the slots' padding") {
    device.max_storage_buffer_range = uint64_t(4) << 30;
    device.max_workgroup_count[1] = 65535;
    device.device_local_bytes = uint64_t(80) << 30;
    params.shape = {4, 16, 16, 4096, 4096, 128};
    params.deterministic = false;
    auto b = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(b.ok());
    REQUIRE(b->stored_ds);
    CHECK(b->dkdv.kernel == "backward_dkdv_store_ds_f16_coopmat2");
    // 48 query rows per step no longer fit beside the dS^T tile (64 keys of 32 queries, padded)
    CHECK((b->dkdv.block_kv == 64 && b->dkdv.block_q == 32 && b->dkdv.workgroup_size == 128));
    CHECK(b->dkdv.shared_memory_bytes == (64 + 2 * 32) * row_bytes + 3 * 32 * 4 + flag + closed_tiles + 64 * 5 * 16);
    CHECK(b->dq.kernel == "backward_dq_from_ds_f16_coopmat2");
    // K rows and dS^T rows (64 keys of 128 queries, padded), the keys' non-finite steps
    CHECK((b->dq.block_q == 128 && b->dq.block_kv == 64 && b->dq.workgroup_size == 128));
    CHECK(b->dq.shared_memory_bytes == 64 * row_bytes + 64 * 17 * 16 + 64 * 4);
    // A forced dK/dV tile of 192 query rows: the deterministic kernel takes it, stored dS (whose
    // slots are padded for 128) does not.
    vkflash::TileOverrides overrides;
    overrides.coopmat2_dkdv = "16x192x32";
    overrides.nondeterministic_dq = "stored-ds";
    params.shape = {1, 1, 1, 200, 200, 32};
    params.deterministic = true;
    b = vkflash::attention::ChooseBackwardKernels(device, params, false, overrides);
    REQUIRE(b.ok());
    CHECK(b->dkdv.block_q == 192);
    params.deterministic = false;
    b = vkflash::attention::ChooseBackwardKernels(device, params, false, overrides);
    REQUIRE(b.ok());
    CHECK(b->stored_ds);
    CHECK(b->dkdv.block_q <= VKF_STORED_DS_PAD);
  }

  SECTION("smaller head dims take larger tiles") {
    params.shape.head_dim = 64;
    auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 128 && f->block_kv == 64 && f->workgroup_size == 128));
    auto b = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(b.ok());
    CHECK((b->dkdv.block_kv == 64 && b->dkdv.block_q == 128 && b->dkdv.workgroup_size == 128));
    CHECK(b->dkdv.shared_memory_bytes == (64 + 2 * 128) * (64 + 8) * 2 + 3 * 128 * 4 + flag + closed_tiles);
    // 32 query rows per subgroup: 4 subgroups own 128
    CHECK((b->dq.block_q == 128 && b->dq.block_kv == 64 && b->dq.workgroup_size == 128));
    CHECK(b->dq.shared_memory_bytes == 2 * 64 * (64 + 8) * 2 + 64 * 4 + 2 * 128 * 4);
    // With a softcap dQ takes 16-row subgroups and dK/dV 64-query steps (faster there on the H200)
    params.softcap = 30.0f;
    b = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(b.ok());
    CHECK((b->dkdv.block_kv == 64 && b->dkdv.block_q == 64 && b->dkdv.workgroup_size == 128));
    CHECK((b->dq.block_q == 64 && b->dq.block_kv == 64 && b->dq.workgroup_size == 128));
  }
  SECTION("the driver's reserved shared memory is not the kernel's") {
    params.shape.kv_len = 1024;  // 80-key steps: 2 x 80 rows of 272 bytes, 43656 bytes with the rest
    device.shared_memory_bytes = 49152;
    device.usable_shared_memory_bytes = 49152;
    device.cooperative_matrix2_reserved_shared_memory = 8192;  // the H100's
    auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 64 && f->shared_memory_bytes <= 49152 - 8192));
    device.cooperative_matrix2_reserved_shared_memory = 0;
    CHECK(vkflash::attention::ChooseForwardKernel(device, params, false)->block_kv == 80);
  }
  SECTION("rows of 1024 keys or more take 80-key steps (96 at head dim 96)") {
    // 80: a multiple of N and K's granularity of 16 at 128 invocations
    params.shape.kv_len = 1024;
    auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 80 && f->workgroup_size == 128));
    CHECK(f->shared_memory_bytes == 2 * 80 * (128 + 8) * 2 + flag + closed_tiles);
    params.shape.head_dim = 96;  // 96 keys: 2 x 96 rows of 208 bytes fit
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 96 && f->workgroup_size == 128));
    CHECK(f->shared_memory_bytes == 2 * 96 * (96 + 8) * 2 + flag + closed_tiles);
    params.causal = true;  // rows see 524.5 keys on average
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 64 && f->workgroup_size == 128));
    params.shape.head_dim = 128;
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 64 && f->workgroup_size == 128));
  }
  SECTION("long rows take the forward tile with more rows per workgroup") {
    params.shape.q_len = params.shape.kv_len = 4096;
    auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 128 && f->block_kv == 64 && f->workgroup_size == 256));
    params.causal = true;  // rows see 2048.5 keys on average
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 80 && f->workgroup_size == 128));
    params.shape.q_len = params.shape.kv_len = 8192;  // 4096.5
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 128 && f->block_kv == 64 && f->workgroup_size == 256));
    // With scores modified element by element (a mask or bias, a softcap, ALiBi) the 64-row tiles
    // run instead (faster on the H100 and H200); sinks, which join at the rows' ends, do not count.
    params.sinks = true;
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 128 && f->block_kv == 64 && f->workgroup_size == 256));
    params.sinks = false;
    params.softcap = 50.0f;
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 80 && f->workgroup_size == 128));
    params.softcap = 0.0f;
    params.alibi = vkflash::AlibiSlopes::kPerHead;
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 80 && f->workgroup_size == 128));
    params.alibi = vkflash::AlibiSlopes::kNone;
    params.mask.type = vkflash::MaskType::kBool;
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 80 && f->workgroup_size == 128));
    device.shared_memory_bytes = 49152;
    device.cooperative_matrix2_reserved_shared_memory = 8192;  // the H100's: 80-key steps do not fit
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 64 && f->workgroup_size == 128));
  }
  SECTION("the forward uses only the listed workgroup sizes") {
    device.cooperative_matrix2_workgroups = {{256, 32, 32, 16}};
    auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 128 && f->block_kv == 64 && f->workgroup_size == 256));
    auto b = vkflash::attention::ChooseBackwardKernels(device, params, false);  // subgroup scope
    REQUIRE(b.ok());
    CHECK((b->dkdv.kernel == "backward_dkdv_f16_coopmat2" && b->dkdv.workgroup_size == 128));
  }
  SECTION("the backward needs subgroup-scope matrices of flexible size and one subgroup size") {
    device.cooperative_matrix2_subgroup_granularity = 0;
    auto b = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(b.ok());
    CHECK((b->dkdv.cooperative_matrix == vkflash::CooperativeMatrixApi::kNone &&
           b->dq.cooperative_matrix == vkflash::CooperativeMatrixApi::kNone));
    device.cooperative_matrix2_subgroup_granularity = 16;
    device.min_subgroup_size = 16;
    auto varying = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(varying.ok());
    CHECK(varying->dkdv.cooperative_matrix == vkflash::CooperativeMatrixApi::kNone);
  }
  SECTION("staged tiles must fit the shared memory") {
    device.usable_shared_memory_bytes = 2 * 32 * row_bytes + flag + closed_tiles - 1;  // not even 32 rows of two tensors
    CHECK(vkflash::attention::ChooseForwardKernel(device, params, false)->cooperative_matrix ==
          vkflash::CooperativeMatrixApi::kNone);
    device.usable_shared_memory_bytes = 2 * 32 * row_bytes + flag + closed_tiles;  // 32-row tiles only
    auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->kernel == "forward_f16_coopmat2" && f->block_kv == 32));
    // The backward's smallest dK/dV tile: one subgroup, 16 keys, 16 queries per step.
    const uint32_t smallest_dkdv = (16 + 32) * row_bytes + 3 * 16 * 4 + flag + closed_tiles;
    device.usable_shared_memory_bytes = smallest_dkdv - 1;
    auto none = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(none.ok());
    CHECK((none->dkdv.cooperative_matrix == vkflash::CooperativeMatrixApi::kNone &&
           none->dq.cooperative_matrix == vkflash::CooperativeMatrixApi::kNone));
    device.usable_shared_memory_bytes = smallest_dkdv;
    auto b = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(b.ok());
    CHECK((b->dkdv.kernel == "backward_dkdv_f16_coopmat2" && b->dkdv.block_kv == 16 && b->dkdv.block_q == 16 &&
           b->dkdv.workgroup_size == 32));
    CHECK(b->dkdv.shared_memory_bytes == smallest_dkdv);
    CHECK((b->dq.kernel == "backward_dq_f16_coopmat2" && b->dq.block_q == 16 && b->dq.block_kv == 16));
  }
  SECTION("tiles follow the granularities listed for their workgroup size") {
    params.shape.q_len = params.shape.kv_len = 2048;  // long enough for 80-key steps
    device.cooperative_matrix2_workgroups[2] = {128, 32, 32, 16};  // keys: N a multiple of 32 at 128
    auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 64 && f->workgroup_size == 128));
    device.cooperative_matrix2_workgroups[2] = {128, 32, 16, 32};  // ... or K a multiple of 32
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 64 && f->block_kv == 64 && f->workgroup_size == 128));
    device.cooperative_matrix2_workgroups[2] = {128, 128, 16, 16};  // rows: M a multiple of 128
    f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK((f->block_q == 128 && f->block_kv == 64 && f->workgroup_size == 256));
  }
  SECTION("no tile is a multiple of the granularity: other kernels run") {
    device.cooperative_matrix2_granularity = 48;
    device.cooperative_matrix2_workgroups = {{128, 48, 48, 48}, {256, 48, 48, 48}};
    params.shape.head_dim = 96;
    CHECK(vkflash::attention::ChooseForwardKernel(device, params, false)->cooperative_matrix ==
          vkflash::CooperativeMatrixApi::kNone);
  }
  SECTION("head dims off the granularity, float32, and instrumented calls run other kernels") {
    params.shape.head_dim = 80;
    CHECK(vkflash::attention::ChooseForwardKernel(device, params, false)->kernel == "forward_tiled_f16_subgroup");
    params.shape.head_dim = 128;
    CHECK(vkflash::attention::ChooseForwardKernel(device, params, /*scalar_only=*/true)->kernel ==
          "forward_f16_subgroup");  // the per-row kernel: instrumented, or views it cannot vector-load
    params.dtype = vkflash::DataType::kFloat32;
    CHECK(vkflash::attention::ChooseForwardKernel(device, params, false)->kernel == "forward_tiled_f32_subgroup");
  }
  SECTION("the backward takes head dims up to 128 on these kernels") {
    params.shape.head_dim = 256;
    auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK(f->kernel == "forward_f16_coopmat2");
    CHECK((f->block_q == 64 && f->block_kv == 32 && f->workgroup_size == 128));
    auto b = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(b.ok());
    CHECK(b->dkdv.cooperative_matrix == vkflash::CooperativeMatrixApi::kNone);
  }
}

TEST_CASE("mean keys a query row sees, causal, windowed and not") {
  using vkflash::attention::KeyBand;
  using vkflash::attention::MeanVisibleKeys;
  const KeyBand none, causal{-1, 0};
  CHECK(MeanVisibleKeys(4, 4, none) == 4.0);
  CHECK(MeanVisibleKeys(4, 4, causal) == 2.5);  // rows see 1, 2, 3, 4 keys
  CHECK(MeanVisibleKeys(2, 5, causal) == 4.5);  // 4, 5
  CHECK(MeanVisibleKeys(5, 2, causal) == Approx(0.6));  // 0, 0, 0, 1, 2
  CHECK(MeanVisibleKeys(0, 7, causal) == 7.0);
  CHECK(MeanVisibleKeys(4, 4, KeyBand{1, 0}) == 1.75);   // keys {0}, {0,1}, {1,2}, {2,3}
  CHECK(MeanVisibleKeys(4, 4, KeyBand{0, 1}) == 1.75);   // {0,1}, {1,2}, {2,3}, {3}
  CHECK(MeanVisibleKeys(2, 6, KeyBand{1, -1}) == 2.5);   // diagonal at 4, 5: keys 3..5, 4..5
  CHECK(MeanVisibleKeys(6, 2, KeyBand{0, 0}) == Approx(2.0 / 6));  // only rows 4 and 5 see a key
}

TEST_CASE("subgroup-scope tensor-core tiles follow shared memory and workgroup limits") {
  vkflash::DeviceInfo device;  // a synthetic device with VK_NV_cooperative_matrix (16x16x16) only
  device.max_workgroup_invocations = 1024;
  device.storage_buffer_16bit = true;
  device.usable_shared_memory_bytes = 49152;
  device.subgroup_size = device.min_subgroup_size = device.max_subgroup_size = 32;
  device.use_subgroup_ops = true;
  device.cooperative_matrix = vkflash::CooperativeMatrixApi::kNv;
  vkflash::AttentionParams params;
  params.dtype = vkflash::DataType::kFloat16;
  params.shape = {1, 2, 2, 1000, 1000, 128};
  // a 16x16 float16 block per subgroup: row blocks pass through it (KHR: accumulators to A operands)
  const uint32_t row_bytes = (128 + 8) * 2, coordinates = 256 * 4, flag = 4, scratch = 4 * 16 * 16 * 2;

  auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
  REQUIRE(f.ok());
  CHECK((f->kernel == "forward_f16_coopmat_nv" && f->family == "coopmat"));
  CHECK((f->block_q == 64 && f->block_kv == 64 && f->workgroup_size == 128));  // 4 subgroups x 16 rows
  CHECK(f->shared_memory_bytes == 2 * 64 * row_bytes + flag + coordinates + scratch);
  auto b = vkflash::attention::ChooseBackwardKernels(device, params, false);
  REQUIRE(b.ok());
  // dK/dV: 64 owned keys, 32 streamed rows (37 KB at D=128)
  CHECK((b->dkdv.kernel == "backward_dkdv_f16_coopmat_nv" && b->dkdv.block_kv == 64 && b->dkdv.block_q == 32));
  // V rows; a region for the K rows, then the Q and dO rows (2 x 32 = 64); their LSE, delta and
  // non-finite steps; the flag
  CHECK(b->dkdv.shared_memory_bytes == (64 + 64) * row_bytes + 3 * 32 * 4 + flag + coordinates + scratch);
  CHECK((b->dq.kernel == "backward_dq_f16_coopmat_nv" && b->dq.block_q == 64 && b->dq.block_kv == 64));
  CHECK((b->dkdv.family == "coopmat" && b->dq.family == "coopmat"));

  SECTION("KHR kernels without the element copy take NV's tiles") {
    device.cooperative_matrix = vkflash::CooperativeMatrixApi::kKhr;
    auto khr = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(khr.ok());
    CHECK((khr->kernel == "forward_f16_coopmat_khr" && khr->block_q == 64 && khr->block_kv == 64));
    CHECK(khr->shared_memory_bytes == 2 * 64 * row_bytes + flag + coordinates + scratch);
    params.shape.head_dim = 64;
    auto khr64 = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(khr64.ok());
    CHECK(khr64->block_kv == 48);
    device.cooperative_matrix_a_copy = true;  // the KHR table; the scratch is still declared
    auto copy = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(copy.ok());
    CHECK((copy->block_kv == 128 &&
           copy->shared_memory_bytes == 2 * 128 * (64 + 8) * 2 + flag + coordinates + scratch));
  }
  SECTION("head dim 64: the KHR kernels with the element copy take 128-key tiles, which fit 48 KB there; NV 48") {
    params.shape.head_dim = 64;
    auto nv = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(nv.ok());
    CHECK((nv->kernel == "forward_f16_coopmat_nv" && nv->block_q == 64 && nv->block_kv == 48));
    device.cooperative_matrix = vkflash::CooperativeMatrixApi::kKhr;
    device.cooperative_matrix_a_copy = true;
    auto khr = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(khr.ok());
    CHECK((khr->kernel == "forward_f16_coopmat_khr" && khr->block_q == 64 && khr->block_kv == 128 &&
           khr->workgroup_size == 128));
    CHECK(khr->shared_memory_bytes == 2 * 128 * (64 + 8) * 2 + flag + coordinates + scratch);
    params.shape.head_dim = 80;  // 128 keys would fit 48 KB (47 KB), but the entry is for D <= 64: 96
    auto khr80 = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(khr80.ok());
    CHECK((khr80->block_q == 64 && khr80->block_kv == 96));
    params.shape.head_dim = 96;  // 96 keys fit (43 KB), but that entry is for D <= 80: 64
    auto khr96 = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(khr96.ok());
    CHECK(khr96->block_kv == 64);
    params.shape.head_dim = 64;
    device.usable_shared_memory_bytes = 32768;  // 128 keys need 40 KB: 96
    auto khr_32k = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(khr_32k.ok());
    CHECK((khr_32k->block_q == 64 && khr_32k->block_kv == 96));
  }
  SECTION("head dim 64, backward: 64 streamed rows in both dK/dV kernels, 32 streamed keys in the NV dQ one") {
    params.shape.head_dim = 64;
    auto nv = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(nv.ok());
    CHECK((nv->dkdv.block_kv == 64 && nv->dkdv.block_q == 64));  // owned keys, streamed rows
    CHECK((nv->dq.block_q == 64 && nv->dq.block_kv == 32));
    device.cooperative_matrix = vkflash::CooperativeMatrixApi::kKhr;
    device.cooperative_matrix_a_copy = true;
    auto khr = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(khr.ok());
    CHECK((khr->dkdv.kernel == "backward_dkdv_f16_coopmat_khr" && khr->dkdv.block_kv == 64 && khr->dkdv.block_q == 64));
    CHECK((khr->dq.kernel == "backward_dq_f16_coopmat_khr" && khr->dq.block_q == 64 && khr->dq.block_kv == 64));
    params.shape.head_dim = 128;  // dK/dV's 64 streamed rows are for D <= 64; the KHR dQ kernel keeps 64 keys
    auto khr_128 = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(khr_128.ok());
    CHECK((khr_128->dkdv.block_kv == 64 && khr_128->dkdv.block_q == 32));
    CHECK((khr_128->dq.block_q == 64 && khr_128->dq.block_kv == 64));
    device.usable_shared_memory_bytes = 32768;  // no 4-subgroup dK/dV tile fits: one subgroup before two
    auto khr_32k = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(khr_32k.ok());
    CHECK((khr_32k->dkdv.block_kv == 16 && khr_32k->dkdv.block_q == 16 && khr_32k->dkdv.workgroup_size == 32));
    CHECK((khr_32k->dq.block_q == 64 && khr_32k->dq.block_kv == 32));
  }
  SECTION("less shared memory: smaller tiles, then the scalar kernels") {
    device.usable_shared_memory_bytes = 32768;  // 64 keys need 37 KB at D=128: 48
    auto mid = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(mid.ok());
    CHECK((mid->block_q == 64 && mid->block_kv == 48 && mid->workgroup_size == 128));
    device.usable_shared_memory_bytes = 16384;  // 32-key tiles need 20 KB: 16 keys, two row blocks a subgroup
    auto small = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(small.ok());
    CHECK((small->kernel == "forward_f16_coopmat_nv" && small->block_q == 128 && small->block_kv == 16 &&
           small->workgroup_size == 128));
    // The gradients too: dK/dV keeps its K rows in registers, so 16 keys and 16 streamed rows fit.
    auto small_b = vkflash::attention::ChooseBackwardKernels(device, params, false);
    REQUIRE(small_b.ok());
    CHECK((small_b->dkdv.kernel == "backward_dkdv_f16_coopmat_nv" && small_b->dkdv.block_kv == 16 &&
           small_b->dkdv.block_q == 16 && small_b->dkdv.workgroup_size == 32));
    CHECK(small_b->dkdv.shared_memory_bytes == (16 + 32) * row_bytes + 3 * 16 * 4 + flag + coordinates + scratch / 4);
    CHECK((small_b->dq.kernel == "backward_dq_f16_coopmat_nv" && small_b->dq.block_q == 16 && small_b->dq.block_kv == 16));
    device.usable_shared_memory_bytes = 2 * 16 * row_bytes + flag + coordinates + scratch / 4 - 1;  // one subgroup's
    auto none = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(none.ok());
    CHECK(none->cooperative_matrix == vkflash::CooperativeMatrixApi::kNone);
  }
  SECTION("head dims past 128 get a single row block per subgroup") {
    params.shape.head_dim = 256;  // 64-key tiles need 66 KB: 4 subgroups x 16 rows, 32 keys
    auto wide = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(wide.ok());
    CHECK((wide->kernel == "forward_f16_coopmat_nv" && wide->block_q == 64 && wide->block_kv == 32 &&
           wide->workgroup_size == 128));
    CHECK(wide->shared_memory_bytes == 2 * 32 * (256 + 8) * 2 + flag + coordinates + scratch);
  }
}

namespace {
// A synthetic device without tensor cores, with float16 arithmetic and subgroups of 32.
vkflash::DeviceInfo ScalarFloat16Device(uint32_t shared_bytes) {
  vkflash::DeviceInfo device;
  device.max_workgroup_invocations = 1024;
  device.usable_shared_memory_bytes = shared_bytes;
  device.storage_buffer_16bit = device.shader_float16 = device.use_float16_arithmetic = true;
  device.subgroup_size = device.min_subgroup_size = device.max_subgroup_size = 32;
  device.use_subgroup_ops = true;
  return device;
}
}  // namespace

TEST_CASE("register-tiled scalar forward: K staged as floats where the tile still fits") {
  vkflash::DeviceInfo device = ScalarFloat16Device(49152);
  vkflash::AttentionParams params;
  params.dtype = vkflash::DataType::kFloat16;
  params.shape = {1, 2, 2, 1000, 1000, 128};
  // Rows of 17 16-byte words (halves: 8 per word, an odd stride) or 33 (floats); P halves at a
  // row stride of Bc + 2; one guard word per V row and one for the tile.
  const auto bytes = [](uint32_t block_q, uint32_t block_kv, bool k_floats) {
    return 16 * (block_q * 17 + block_kv * 17 + block_kv * (k_floats ? 33 : 17)) + 2 * block_q * (block_kv + 2) +
           4 * (block_kv + 1);
  };
  struct Case {
    uint32_t shared_bytes;
    const char* kernel;
    uint32_t block_q, block_kv;
    bool k_floats;
  };
  for (Case c : {Case{49152, "forward_tiled_f16math_kf32_subgroup", 64, 32, true},  // 47492 bytes
                 Case{32768, "forward_tiled_f16math_subgroup", 32, 32, false},      // as floats: 36612
                 Case{16384, "forward_tiled_f16math_subgroup", 16, 16, false}}) {   // as floats: 17796
    device.usable_shared_memory_bytes = c.shared_bytes;
    INFO(c.shared_bytes << " bytes of shared memory");
    auto f = vkflash::attention::ChooseForwardKernel(device, params, false);
    REQUIRE(f.ok());
    CHECK(f->kernel == c.kernel);
    CHECK((f->block_q == c.block_q && f->block_kv == c.block_kv));
    CHECK(f->shared_memory_bytes == bytes(c.block_q, c.block_kv, c.k_floats));
    CHECK(f->shared_memory_bytes <= c.shared_bytes);
  }
  device.use_float16_arithmetic = false;  // float32 products: words of floats, one variant
  device.usable_shared_memory_bytes = 49152;
  CHECK(vkflash::attention::ChooseForwardKernel(device, params, false)->kernel == "forward_tiled_f16_subgroup");
}

TEST_CASE("register-tiled scalar forward: a forced tile runs even where only shared-memory reductions can take it") {
  const vkflash::DeviceInfo device = ScalarFloat16Device(49152);
  vkflash::AttentionParams params;
  params.dtype = vkflash::DataType::kFloat16;
  params.shape = {1, 2, 1, 100, 130, 64};
  vkflash::TileOverrides overrides;
  // 8 rows of 1 per invocation, 2 invocations per row group: 16 invocations, half a subgroup.
  overrides.scalar_forward = "8x6x2x1";
  auto small = vkflash::attention::ChooseForwardKernel(device, params, false, overrides);
  REQUIRE(small.ok());
  CHECK(small->kernel == "forward_tiled_f16math_kf32_shared");
  CHECK((small->block_q == 8 && small->block_kv == 6 && small->workgroup_size == 16 && !small->subgroup_reductions));
  // A forced tile that subgroups can take keeps them.
  overrides.scalar_forward = "16x64x8x2";
  auto wide = vkflash::attention::ChooseForwardKernel(device, params, false, overrides);
  REQUIRE(wide.ok());
  CHECK((wide->block_q == 16 && wide->block_kv == 64 && wide->subgroup_reductions));
}
