// Backward pass vs float64 reference gradients (themselves checked against finite differences),
// determinism, the O(N) memory bound, and the portability knobs.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <utility>

#include "attention/backends/coopmat2_backend.h"
#include "attention/kernel_choice.h"
#include "common/shader_interface.h"
#include "reference_attention.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

// The gradients of a random call within the tolerance; returns the run and the workspace bytes,
// the only memory the backward allocated.
std::pair<BackwardRun, uint64_t> RunWithinTolerance(Context& context, const AttentionParams& params, uint32_t seed) {
  BackwardRun run = RunBackwardCase(context, params, seed);
  const double tolerance = BackwardTolerance(params.dtype);
  CHECK(run.dq_error <= tolerance);
  CHECK(run.dk_error <= tolerance);
  CHECK(run.dv_error <= tolerance);
  auto workspace = context.BackwardWorkspaceBytes(params);
  REQUIRE(workspace.ok());
  CHECK(run.peak_extra_bytes == *workspace);
  return {std::move(run), *workspace};
}

void CheckGradients(Context& context, const AttentionParams& params, uint32_t seed) {
  INFO(Describe(params));
  // The workspace: one float per query row, where the loops fit the driver's loop budget (these
  // shapes do).
  CHECK(RunWithinTolerance(context, params, seed).second == params.shape.lse_elements() * sizeof(float));
  RequireNoValidationMessages();
}

// sum(O * dO) from the float64 reference forward, for finite differences.
double Loss(const AttentionParams& p, const std::vector<float>& q, const std::vector<float>& k,
            const std::vector<float>& v, const std::vector<float>& d_o) {
  const auto forward = tools::ReferenceAttentionForward(p, q, k, v);
  double loss = 0.0;
  for (size_t i = 0; i < d_o.size(); ++i) loss += forward.o[i] * d_o[i];
  return loss;
}

const std::vector<AttentionShape> kShapes = {
    {1, 1, 1, 1, 1, 16},   {1, 2, 2, 7, 13, 32},   {2, 4, 2, 40, 40, 64},  {1, 3, 1, 37, 61, 80},
    {1, 2, 2, 50, 19, 96}, {1, 1, 1, 33, 33, 128}, {1, 4, 1, 5, 23, 160},  {1, 1, 1, 3, 20, 192},
    {1, 1, 1, 17, 21, 256}, {1, 2, 1, 9, 17, 3},
    // several tiles of the tensor-core kernels in both directions, with tails
    {1, 4, 2, 150, 170, 64}, {1, 2, 1, 130, 97, 128},
};

}  // namespace

TEST_CASE("the preprocess takes 256 invocations where the device allows, else Vulkan's minimum", "[backward]") {
  DeviceInfo device;
  for (const uint32_t limit : {128u, 255u, 256u, 1024u}) {
    device.max_workgroup_invocations = limit;
    const uint32_t size = attention::PreprocessWorkgroupSize(device);
    INFO("maxComputeWorkGroupInvocations " << limit);
    CHECK(size == (limit >= 256 ? 256u : 128u));
    CHECK(size <= limit);
    CHECK(size % VKF_PREPROCESS_THREADS_PER_ROW == 0);
  }
}

TEST_CASE("the reference gradients match finite differences of the reference forward", "[backward][reference]") {
  for (bool causal : {false, true}) {
    AttentionParams p;
    p.shape = {1, 2, 1, 5, 7, 4};
    p.causal = causal;
    auto q = RandomValues(p.shape.q_elements(), DataType::kFloat32, 1);
    auto k = RandomValues(p.shape.kv_elements(), DataType::kFloat32, 2);
    auto v = RandomValues(p.shape.kv_elements(), DataType::kFloat32, 3);
    const auto d_o = RandomValues(p.shape.q_elements(), DataType::kFloat32, 4);
    const auto grads = tools::ReferenceAttentionBackward(p, q, k, v, d_o);
    const float step = 1e-2f;  // float inputs: a coarse step, a central difference (error ~ step^2)
    auto check = [&](std::vector<float>& x, const std::vector<double>& grad) {
      for (size_t i = 0; i < x.size(); i += 3) {
        const float saved = x[i];
        x[i] = saved + step;
        const double up = Loss(p, q, k, v, d_o);
        x[i] = saved - step;
        const double down = Loss(p, q, k, v, d_o);
        x[i] = saved;
        const double numeric = (up - down) / (double(saved + step) - double(saved - step));
        INFO("causal=" << causal << " element " << i);
        CHECK(numeric == Approx(grad[i]).margin(2e-4).epsilon(1e-3));
      }
    };
    check(q, grads.dq);
    check(k, grads.dk);
    check(v, grads.dv);
  }
}

TEST_CASE("backward matches the float64 reference gradients on device limits", "[backward]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 1;
  for (const AttentionParams& params : FullSweep(kShapes)) CheckGradients(context, params, seed++);
}

TEST_CASE("backward on mobile-sized limits and with descriptor pools", "[backward][knobs]") {
  uint32_t seed = 300;
  for (Knobs knobs : {Knobs::kMobile, Knobs::kNoPushDescriptors}) {
    Context& context = SharedContext(knobs);
    INFO(KnobsName(knobs));
    for (const AttentionShape& shape : kShapes) {
      AttentionParams params;
      params.shape = shape;
      params.dtype = seed % 2 ? DataType::kFloat16 : DataType::kFloat32;
      params.causal = seed % 3 == 0;
      if (knobs == Knobs::kMobile) {
        auto choice = context.ChooseBackwardKernels(params);
        REQUIRE(choice.ok());
        CHECK(choice->dkdv.shared_memory_bytes <= 16384);
        CHECK(choice->dq.shared_memory_bytes <= 16384);
      }
      CheckGradients(context, params, seed++);
    }
  }
}

TEST_CASE("the scalar family's register-tiled gradient kernels run aligned calls, the per-row ones the rest",
          "[backward][scalar]") {
  ContextOptions options = ValidatedOptions();
  options.kernels = "scalar";
  SECTION("the default: register-tiled where the head dim is a multiple of 8") {
    auto created = Context::Create(options);
    REQUIRE(created.ok());
    Context& context = **created;
    for (const AttentionShape& shape : kShapes) {
      const AttentionParams params = MakeParams(shape, DataType::kFloat16, false);
      INFO(Describe(params));
      auto choice = context.ChooseBackwardKernels(params);
      REQUIRE(choice.ok());
      const bool tiled = shape.head_dim % 8 == 0;
      CHECK(choice->dkdv.kernel == (tiled ? "backward_dkdv_tiled_f16" : "backward_dkdv_f16"));
      CHECK(choice->dq.kernel == (tiled ? "backward_dq_tiled_f16" : "backward_dq_f16"));
    }
  }
  SECTION("forced tiles (the smallest register blocks), and the per-row kernels on every call") {
    uint32_t seed = 500;
    for (const char* tiles : {"8x8x2x1,4x4x1x1", "16x8x4x2,8x16x2x2", "per-row"}) {
      options.tile_overrides.scalar_backward = tiles;
      auto created = Context::Create(options);
      REQUIRE(created.ok());
      Context& context = **created;
      for (const AttentionShape& shape : kShapes) {
        if (shape.head_dim % 32 != 0 || shape.head_dim > 128) continue;  // rows of words the forced tiles divide
        const AttentionParams params = MakeParams(shape, seed % 2 ? DataType::kFloat16 : DataType::kFloat32, seed % 3 == 0);
        INFO(tiles << ", " << Describe(params));
        auto choice = context.ChooseBackwardKernels(params);
        REQUIRE(choice.ok());
        if (std::string(tiles) == "per-row") {
          CHECK(choice->dkdv.kernel.find("tiled") == std::string::npos);
          CHECK(choice->dq.kernel.find("tiled") == std::string::npos);
        } else {
          const uint32_t dkdv_keys = tiles[0] == '8' ? 8 : 16, dq_rows = tiles[0] == '8' ? 4 : 8;
          CHECK((choice->dkdv.block_kv == dkdv_keys && choice->dq.block_q == dq_rows));
          CHECK(choice->dkdv.kernel.find("tiled") != std::string::npos);
          CHECK(choice->dq.kernel.find("tiled") != std::string::npos);
        }
        RunWithinTolerance(context, params, seed++);
      }
    }
    RequireNoValidationMessages();
  }
}

TEST_CASE("backward with a custom scale and large logits", "[backward]") {
  Context& context = SharedContext(Knobs::kDevice);
  for (float scale : {0.05f, -0.3f, 4.0f}) {
    AttentionParams params;
    params.shape = {1, 2, 1, 23, 31, 32};
    params.scale = scale;
    params.causal = scale > 0.1f;
    CheckGradients(context, params, 40);
  }
}

TEST_CASE("backward gradients are bit-identical run after run", "[backward]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams params;
  params.shape = {2, 8, 2, 45, 70, 64};  // GQA: four query heads feed each dK/dV row
  params.causal = true;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    params.dtype = dtype;
    const BackwardRun first = RunBackwardCase(context, params, 9);
    const BackwardRun second = RunBackwardCase(context, params, 9);
    REQUIRE(first.dq == second.dq);
    REQUIRE(first.dk == second.dk);
    REQUIRE(first.dv == second.dv);
  }
  RequireNoValidationMessages();
}

TEST_CASE("deterministic = false sums dQ with float atomics where the family and device have them",
          "[backward][atomic]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 500;
  for (AttentionParams params : FullSweep(kShapes)) {
    INFO(Describe(params));
    params.deterministic = false;
    auto choice = context.ChooseBackwardKernels(params);
    REQUIRE(choice.ok());
    const bool atomic = ExpectAtomicDq(context, params);  // these shapes are small: where the family runs
    REQUIRE(choice->atomic_dq == atomic);
    const auto [run, workspace] = RunWithinTolerance(context, params, seed);
    if (atomic) {
      CHECK(choice->dkdv.kernel == "backward_dkdv_atomic_dq_f16_coopmat2");
      CHECK(choice->dq.kernel == "backward_dq_from_sums_f16");
      // delta and the float32 dQ sums: O(N), as the chunked kernels' state
      CHECK(workspace >= (params.shape.lse_elements() + params.shape.q_elements()) * sizeof(float));
    } else if (!choice->stored_ds) {  // the deterministic kernels run the call: the same bits
      params.deterministic = true;
      const BackwardRun same = RunBackwardCase(context, params, seed);
      REQUIRE(same.dq == run.dq);
      REQUIRE(same.dk == run.dk);
      REQUIRE(same.dv == run.dv);
    }
    ++seed;
  }
  RequireNoValidationMessages();
}

// Where a context that asks for stored dS (TileOverrides::nondeterministic_dq) runs it: calls the
// VK_NV_cooperative_matrix2 family takes, without a mask, whose (batch, KV head) pair fits the budget.
bool ExpectStoredDs(const Context& context, AttentionParams params, uint32_t max_mib) {
  params.deterministic = true;
  auto deterministic = context.ChooseBackwardKernels(params);
  REQUIRE(deterministic.ok());
  return deterministic->dkdv.family == "coopmat2" && params.mask.type == MaskType::kNone &&
         attention::StoredDsChunkPairs(context.device_info(), params.shape, max_mib) > 0;
}

TEST_CASE("stored dS (deterministic = false): dQ from the dS that the dK/dV kernel stored, whole and in chunks",
          "[backward][stored_ds]") {
  // 1 MiB holds 3 of the first shape's 4 (batch, KV head) pairs (two chunks of 2), none of the last's
  // (the deterministic kernels then run it); the default holds every call whole.
  for (const uint32_t max_mib : {0u, 1u}) {
    ContextOptions options = ValidatedOptions();
    options.tile_overrides.nondeterministic_dq = "stored-ds";
    options.tile_overrides.stored_ds_max_mib = max_mib;
    auto created = Context::Create(options);
    REQUIRE(created.ok());
    Context& context = **created;
    uint32_t seed = 900 + 50 * max_mib;
    for (const AttentionShape& shape : std::vector<AttentionShape>{
             {2, 4, 2, 150, 170, 64}, {1, 2, 1, 130, 97, 128}, {1, 3, 3, 64, 64, 32}, {2, 4, 1, 200, 333, 128}}) {
      for (int variant = 0; variant < 4; ++variant) {
        // plain; causal; a window with a softcap; causal with sinks (one head's sink -inf)
        AttentionParams params = MakeParams(shape, DataType::kFloat16, variant == 1 || variant == 3);
        params.deterministic = false;
        ScoreValues values;
        if (variant == 2) {
          params.window = {40, 7};
          params.softcap = 5.0f;
        }
        if (variant == 3) {
          params.sinks = true;
          for (uint32_t h = 0; h < shape.q_heads; ++h) values.sinks.push_back(h == 1 ? -INFINITY : 0.5f * float(h));
        }
        INFO(Describe(params) << ", stored_ds_max_mib " << max_mib);
        auto choice = context.ChooseBackwardKernels(params);
        REQUIRE(choice.ok());
        const bool stored = ExpectStoredDs(context, params, max_mib);
        REQUIRE(choice->stored_ds == stored);
        CHECK_FALSE(choice->atomic_dq);
        const BackwardRun run = RunBackwardCase(context, params, seed, values);
        const double tolerance = BackwardTolerance(params.dtype);
        CHECK(run.dq_error <= tolerance);
        CHECK(run.dk_error <= tolerance);
        CHECK(run.dv_error <= tolerance);
        if (params.sinks) CHECK(run.dsinks_error <= tolerance);
        auto workspace = context.BackwardWorkspaceBytes(params);
        REQUIRE(workspace.ok());
        CHECK(run.peak_extra_bytes == *workspace);
        if (stored) {
          CHECK(choice->dkdv.kernel == "backward_dkdv_store_ds_f16_coopmat2");
          CHECK(choice->dq.kernel == "backward_dq_from_ds_f16_coopmat2");
          // delta and one chunk's dS^T slots
          const uint32_t pairs = attention::StoredDsChunkPairs(context.device_info(), shape, max_mib);
          CHECK(pairs <= shape.batch * shape.kv_heads);
          CHECK(*workspace >= shape.lse_elements() * sizeof(float) + pairs * attention::StoredDsPairBytes(shape));
          // No atomics: the same bits again, also over a workspace of NaN (the dQ kernel reads the
          // slots' pairs that the dK/dV kernel never wrote, and must drop them).
          const BackwardRun again = RunBackwardCase(context, params, seed, values, /*nan_workspace=*/true);
          REQUIRE(again.dq == run.dq);
          REQUIRE(again.dk == run.dk);
          REQUIRE(again.dv == run.dv);
        }
        ++seed;
      }
    }
    RequireNoValidationMessages();
  }
}

TEST_CASE("stored dS takes chunks of whole (batch, KV head) pairs within its budget", "[backward][stored_ds]") {
  DeviceInfo device;
  device.max_storage_buffer_range = uint64_t(4) << 30;
  device.max_workgroup_count[1] = 65535;
  device.device_local_bytes = uint64_t(16) << 30;  // a default budget of 1 GiB
  // 2 query heads per KV head, rows of 4096 + 128 queries, 4096 + 128 keys: 71.3 MB per pair
  const AttentionShape shape{4, 16, 8, 4096, 4096, 128};
  CHECK(attention::StoredDsPairBytes(shape) == uint64_t(2) * 4224 * 4224 * 2);
  CHECK(attention::StoredDsChunkPairs(device, shape, 0) == 11);    // 1024 MiB: 15 fit, 3 chunks of 11, 11, 10
  CHECK(attention::StoredDsChunkPairs(device, shape, 1024) == 11);
  CHECK(attention::StoredDsChunkPairs(device, shape, 4096) == 32);  // every pair
  CHECK(attention::StoredDsChunkPairs(device, shape, 68) == 0);     // not even one
  device.max_storage_buffer_range = uint64_t(128) << 20;  // the binding's limit bounds it too
  CHECK(attention::StoredDsChunkPairs(device, shape, 4096) == 1);
  device.max_workgroup_count[1] = 1;  // the dQ dispatch's y: a pair's 2 query heads do not fit
  CHECK(attention::StoredDsChunkPairs(device, shape, 4096) == 0);
  device.device_local_bytes = 0;  // unknown: 1 GiB
  CHECK(attention::StoredDsDefaultBytes(device) == uint64_t(1) << 30);
}

TEST_CASE("deterministic = false stores dS by itself only at D >= 128, without a mask, in one chunk",
          "[backward][stored_ds]") {
  DeviceInfo device;
  device.max_storage_buffer_range = uint64_t(4) << 30;
  device.max_workgroup_count[1] = 65535;
  device.device_local_bytes = uint64_t(80) << 30;  // an H100: 5 GiB, within the 4 GiB range
  AttentionParams params;
  params.deterministic = false;
  params.shape = {4, 16, 16, 4096, 4096, 128};  // 64 pairs of 35.7 MB: 2.3 GB, one chunk
  CHECK(attention::StoredDsPays(device, params, 0));
  CHECK_FALSE(attention::StoredDsPays(device, params, 1024));  // three chunks
  params.shape.head_dim = 64;
  CHECK_FALSE(attention::StoredDsPays(device, params, 0));
  params.shape = {1, 16, 16, 16384, 16384, 128};  // 8.6 GB
  CHECK_FALSE(attention::StoredDsPays(device, params, 0));
  params.shape = {4, 16, 16, 4096, 4096, 128};
  params.mask.type = MaskType::kBool;
  CHECK_FALSE(attention::StoredDsPays(device, params, 0));
  device.device_local_bytes = uint64_t(8) << 30;  // 512 MiB
  params.mask.type = MaskType::kNone;
  CHECK_FALSE(attention::StoredDsPays(device, params, 0));
  params.shape.batch = 1;  // 16 pairs: 571 MB
  CHECK_FALSE(attention::StoredDsPays(device, params, 0));
  params.shape.q_heads = params.shape.kv_heads = 8;  // 286 MB
  CHECK(attention::StoredDsPays(device, params, 0));
}

TEST_CASE("atomic dQ runs only where the dQ kernel would fill at most half the compute units", "[backward][atomic]") {
  DeviceInfo device;
  device.compute_units = 132;
  KernelChoice dq;
  dq.block_q = 64;
  AttentionParams params;
  params.shape = {1, 32, 8, 128, 16384, 128};  // 2 query tiles x 32 heads: 64 workgroups
  CHECK(attention::AtomicDqPays(device, params, dq));
  params.shape.q_len = 129;  // 96 workgroups
  CHECK_FALSE(attention::AtomicDqPays(device, params, dq));
  params.shape = {2, 16, 16, 4096, 4096, 64};
  CHECK_FALSE(attention::AtomicDqPays(device, params, dq));
  device.compute_units = 0;  // unknown: 16 assumed
  params.shape = {1, 2, 2, 200, 200, 64};  // 8 workgroups
  CHECK(attention::AtomicDqPays(device, params, dq));
  params.shape.batch = 2;
  CHECK_FALSE(attention::AtomicDqPays(device, params, dq));
}

TEST_CASE("rows that see no key get zero gradients, and empty sides give zeros", "[backward][causal]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams params;
  params.causal = true;
  params.shape = {1, 2, 1, 30, 8, 16};  // query rows 0..21 see no key
  const BackwardRun run = RunBackwardCase(context, params, 21);
  CHECK(run.dq_error <= BackwardTolerance(params.dtype));
  for (uint32_t h = 0; h < 2; ++h)
    for (uint32_t row = 0; row < 22; ++row)
      for (uint32_t d = 0; d < 16; ++d) REQUIRE(run.dq[(h * 30 + row) * 16 + d] == 0.0f);

  params.shape = {1, 2, 1, 6, 0, 16};  // no keys: dQ is all zeros
  const BackwardRun no_keys = RunBackwardCase(context, params, 22);
  for (float x : no_keys.dq) REQUIRE(x == 0.0f);
  params.shape = {1, 2, 1, 0, 6, 16};  // no queries: dK and dV are all zeros
  const BackwardRun no_queries = RunBackwardCase(context, params, 23);
  for (float x : no_queries.dk) REQUIRE(x == 0.0f);
  for (float x : no_queries.dv) REQUIRE(x == 0.0f);

  // The same with dQ summed by atomics, where the device does that (float16 tensor cores).
  params.dtype = DataType::kFloat16;
  params.deterministic = false;
  params.shape = {1, 2, 1, 70, 16, 64};  // query rows 0..53 see no key
  auto choice = context.ChooseBackwardKernels(params);
  REQUIRE(choice.ok());
  REQUIRE(choice->atomic_dq == ExpectAtomicDq(context, params));
  const BackwardRun atomic = RunBackwardCase(context, params, 24);
  CHECK(atomic.dq_error <= BackwardTolerance(params.dtype));
  for (uint32_t h = 0; h < 2; ++h)
    for (uint32_t row = 0; row < 54; ++row)
      for (uint32_t d = 0; d < 64; ++d) REQUIRE(atomic.dq[(h * 70 + row) * 64 + d] == 0.0f);
  params.shape = {1, 2, 1, 6, 0, 64};
  for (float x : RunBackwardCase(context, params, 25).dq) REQUIRE(x == 0.0f);
  params.shape = {1, 2, 1, 0, 6, 64};
  const BackwardRun atomic_no_queries = RunBackwardCase(context, params, 26);
  for (float x : atomic_no_queries.dk) REQUIRE(x == 0.0f);
  for (float x : atomic_no_queries.dv) REQUIRE(x == 0.0f);
  RequireNoValidationMessages();
}

TEST_CASE("backward refuses overlapping outputs and a missing workspace when recording", "[backward][errors]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams params;
  params.shape = {1, 2, 1, 8, 8, 16};
  const uint64_t q_bytes = params.shape.q_elements() * 4, kv_bytes = params.shape.kv_elements() * 4;
  auto make = [&](uint64_t bytes) {
    auto b = context.CreateBuffer(bytes);
    REQUIRE(b.ok());
    return std::move(b).value();
  };
  Buffer q = make(q_bytes), k = make(kv_bytes), v = make(kv_bytes), o = make(q_bytes), lse = make(64), d_o = make(q_bytes),
         dq = make(q_bytes), dk = make(kv_bytes), dv = make(kv_bytes);
  BackwardBuffers b{q.view(), k.view(), v.view(), o.view(), lse.view(), d_o.view(), dq.view(), dk.view(), dv.view(), {}};
  BackwardBuffers overlapping = b;
  overlapping.dq = b.q;
  Status s = context.Backward(params, overlapping);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("overlap") != std::string::npos);
  // RecordBackward has no way to allocate: the workspace is required.
  s = context.RecordBackward(reinterpret_cast<VkCommandBuffer>(uintptr_t(1)), params, b);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("workspace") != std::string::npos);
  RequireNoValidationMessages();
}
