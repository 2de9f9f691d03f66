// Forward pass vs the float64 CPU reference, over awkward shapes, both dtypes, causal and not,
// and the portability knobs.
#include <catch2/catch.hpp>
#include <vkflash/diagnostics.hpp>

#include <cmath>
#include <string>

#include "reference_attention.h"
#include "storage_bytes.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

// {batch, q_heads, kv_heads, q_len, kv_len, head_dim}: lengths of 1, primes, Nq != Nk both
// ways, GQA and MQA, tails that are not a multiple of any tile, every listed head dim and odd ones.
const std::vector<AttentionShape> kShapes = {
    {1, 1, 1, 1, 1, 16},   {1, 2, 2, 7, 13, 32},  {2, 4, 2, 64, 64, 64},  {1, 3, 1, 37, 101, 80},
    {1, 2, 2, 100, 31, 96}, {1, 1, 1, 41, 41, 128}, {1, 2, 1, 5, 67, 160}, {1, 1, 1, 3, 40, 192},
    {1, 1, 1, 19, 23, 256}, {2, 2, 1, 11, 5, 8},    {1, 1, 1, 9, 17, 1},   {1, 2, 2, 13, 29, 3},
    {1, 1, 1, 33, 65, 72},
    // several Q and K tiles of the tensor-core kernels, with tails
    {2, 4, 2, 300, 517, 64}, {1, 2, 1, 257, 255, 128},
};

}  // namespace

TEST_CASE("forward matches the float64 reference on device limits", "[forward]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 1;
  for (const AttentionParams& params : FullSweep(kShapes)) CheckForwardAgainstReference(context, params, seed++);
}

TEST_CASE("forward on mobile-sized limits: 16 KB shared memory, shared-memory reductions", "[forward][knobs]") {
  Context& context = SharedContext(Knobs::kMobile);
  const DeviceInfo& info = context.device_info();
  REQUIRE(info.usable_shared_memory_bytes == 16384);
  REQUIRE_FALSE(info.use_subgroup_ops);
  uint32_t seed = 500;
  for (const AttentionShape& shape : kShapes) {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
      AttentionParams params;
      params.shape = shape;
      params.dtype = dtype;
      params.causal = (seed % 2) == 0;
      auto choice = context.ChooseForwardKernel(params);
      REQUIRE(choice.ok());
      CHECK(choice->shared_memory_bytes <= 16384);
      CHECK_FALSE(choice->subgroup_reductions);
      CheckForwardAgainstReference(context, params, seed++);
    }
  }
}

TEST_CASE("forward with descriptor pools instead of push descriptors", "[forward][knobs]") {
  Context& context = SharedContext(Knobs::kNoPushDescriptors);
  REQUIRE_FALSE(context.device_info().use_push_descriptors);
  AttentionParams params;
  params.shape = {2, 4, 2, 45, 70, 64};
  for (bool causal : {false, true}) {
    params.causal = causal;
    // Each run makes and frees its own buffers: freeing must drop the cached descriptor sets
    // that name them (a stale set pointing at a destroyed buffer is a validation error).
    CheckForwardAgainstReference(context, params, 900);
    CheckForwardAgainstReference(context, params, 901);
  }
}

TEST_CASE("forward with a custom scale", "[forward]") {
  Context& context = SharedContext(Knobs::kDevice);
  for (float scale : {0.0f, 0.03f, 1.0f, -0.5f}) {
    AttentionParams params;
    params.shape = {1, 2, 1, 29, 47, 64};
    params.scale = scale;
    params.causal = scale > 0.5f;
    CheckForwardAgainstReference(context, params, 77);
  }
}

TEST_CASE("forward with large logits stays finite (online softmax rescaling)", "[forward]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams params;
  params.shape = {1, 1, 1, 40, 200, 32};
  params.scale = 8.0f;  // logits of order +-100: a naive exp overflows
  CheckForwardAgainstReference(context, params, 3);
}

TEST_CASE("causal rows that see no key give zeros and -inf, and Nk = 0 is all such rows", "[forward][causal]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams params;
  params.causal = true;
  params.shape = {1, 2, 1, 50, 10, 16};  // rows 0..39 see no key (bottom-right alignment)
  CheckForwardAgainstReference(context, params, 11);
  params.shape = {1, 2, 1, 6, 0, 16};    // no keys at all: every row, causal or not
  CheckForwardAgainstReference(context, params, 12);
  params.causal = false;
  CheckForwardAgainstReference(context, params, 13);
}

TEST_CASE("forward results are bit-identical run after run", "[forward]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams params;
  params.shape = {1, 2, 2, 70, 90, 64};
  params.causal = true;
  const ForwardRun first = RunForwardCase(context, params, 5);
  const ForwardRun second = RunForwardCase(context, params, 5);
  REQUIRE(first.o == second.o);
  REQUIRE(first.lse == second.lse);
  RequireNoValidationMessages();
}

TEST_CASE("LSE is optional, and tensors can live at offsets inside one caller buffer", "[forward]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams params;
  params.shape = {1, 2, 1, 21, 34, 32};
  const auto& s = params.shape;
  const VkDeviceSize align = std::max<VkDeviceSize>(context.device_info().min_storage_buffer_offset_alignment, 4);
  auto Align = [&](VkDeviceSize x) { return (x + align - 1) / align * align; };
  const VkDeviceSize q_bytes = s.q_elements() * 4, kv_bytes = s.kv_elements() * 4;
  const VkDeviceSize q_off = 0, k_off = Align(q_bytes), v_off = Align(k_off + kv_bytes), o_off = Align(v_off + kv_bytes);
  auto big = context.CreateBuffer(o_off + q_bytes);
  REQUIRE(big.ok());

  const auto q = RandomValues(s.q_elements(), DataType::kFloat32, 1);
  const auto k = RandomValues(s.kv_elements(), DataType::kFloat32, 2);
  const auto v = RandomValues(s.kv_elements(), DataType::kFloat32, 3);
  const VkBuffer b = big->handle();
  REQUIRE(context.Upload({b, q_off, q_bytes}, q.data(), q_bytes).ok());
  REQUIRE(context.Upload({b, k_off, kv_bytes}, k.data(), kv_bytes).ok());
  REQUIRE(context.Upload({b, v_off, kv_bytes}, v.data(), kv_bytes).ok());
  const std::vector<float> poison(s.q_elements(), NAN);
  REQUIRE(context.Upload({b, o_off, q_bytes}, poison.data(), q_bytes).ok());

  ForwardBuffers buffers{{b, q_off, q_bytes}, {b, k_off, kv_bytes}, {b, v_off, kv_bytes}, {b, o_off, q_bytes}, {}};
  const Status status = context.Forward(params, buffers);
  INFO(status.ToString());
  REQUIRE(status.ok());
  std::vector<float> o(s.q_elements());
  REQUIRE(context.Download({b, o_off, q_bytes}, o.data(), q_bytes).ok());
  const auto reference = tools::ReferenceAttentionForward(params, q, k, v);
  CHECK(tools::RelativeError(o, reference.o) <= ForwardTolerance(DataType::kFloat32));
  RequireNoValidationMessages();
}

TEST_CASE("the naive three-pass baseline agrees with the reference and with the flash kernel", "[forward][naive]") {
  Context& context = SharedContext(Knobs::kDevice);
  for (const AttentionParams& params : FullSweep({{1, 4, 2, 23, 37, 32}, {2, 2, 2, 40, 17, 80}})) {
    INFO(Describe(params));
    const auto& s = params.shape;
    const size_t e = DataTypeSize(params.dtype);
    const auto q = RandomValues(s.q_elements(), params.dtype, 1), k = RandomValues(s.kv_elements(), params.dtype, 2),
               v = RandomValues(s.kv_elements(), params.dtype, 3);
    auto upload = [&](const std::vector<float>& values) {
      auto b = context.CreateBuffer(values.size() * e);
      REQUIRE(b.ok());
      const auto bytes = tools::PackTensor(values, params.dtype);
      REQUIRE(context.Upload(b->view(), bytes.data(), bytes.size()).ok());
      return std::move(b).value();
    };
    Buffer qb = upload(q), kb = upload(k), vb = upload(v), ob = upload(std::vector<float>(s.q_elements(), NAN));
    auto scores = context.CreateBuffer(NaiveScoresBytes(s));
    REQUIRE(scores.ok());
    // MeasureGpuTime doubles as "record, submit, wait" for a Record* call.
    const Status status = MeasureGpuTime(context,
        [&](VkCommandBuffer cmd) {
          return RecordNaiveForward(context, cmd, params, {qb.view(), kb.view(), vb.view(), ob.view()}, scores->view());
        },
        1).status();
    INFO(status.ToString());
    REQUIRE(status.ok());
    std::vector<uint8_t> bytes(s.q_elements() * e);
    REQUIRE(context.Download(ob.view(), bytes.data(), bytes.size()).ok());
    const auto reference = tools::ReferenceAttentionForward(params, q, k, v);
    CHECK(tools::RelativeError(tools::UnpackTensor(bytes, params.dtype), reference.o) <= ForwardTolerance(params.dtype));
  }
  RequireNoValidationMessages();
}

TEST_CASE("register-tiled scalar forward: float16 products, and float32 rows where a float16 sum could overflow",
          "[forward][scalar]") {
  // The table's tile; 64 keys per step (two float16 partials of P V per tile); 6 keys (P V's
  // loop of VKF_TILED_FORWARD_PV_KEYS_PER_STEP = 8 keys per iteration ends inside its one iteration).
  struct Tile {
    const char* forced;
    uint32_t block_q, block_kv;  // the forced tile, which fits 32 KB with float16 math (0: the table's)
  };
  for (Tile tile : {Tile{"", 0, 0}, Tile{"16x64x8x2", 16, 64}, Tile{"8x6x2x1", 8, 6}})
  for (bool float16_products : {true, false}) {
    ContextOptions options = ValidatedOptions();
    options.kernels = "scalar";
    options.disable_float16_arithmetic = !float16_products;
    options.tile_overrides.scalar_forward = tile.forced;
    auto created = Context::Create(options);
    REQUIRE(created.ok());
    Context& context = **created;
    const bool f16_math = float16_products && context.device_info().use_float16_arithmetic;
    for (bool causal : {false, true}) {
      const AttentionParams params = MakeParams({1, 2, 1, 100, 130, 64}, DataType::kFloat16, causal);
      const AttentionShape& s = params.shape;
      auto choice = context.ChooseForwardKernel(params);
      REQUIRE(choice.ok());
      CHECK(choice->kernel.rfind(f16_math ? "forward_tiled_f16math_" : "forward_tiled_f16_", 0) == 0);
      if (f16_math && tile.block_q != 0) CHECK((choice->block_q == tile.block_q && choice->block_kv == tile.block_kv));
      // Amplitudes (powers of two: the scaled values stay float16-exact) of Q, K, V, and whether
      // only query row 37 of head 0 gets the Q amplitude. 256 makes Q K^T sums of 16 products
      // overflow float16; 8192 does the same to P V sums.
      struct Case {
        float q, k, v;
        bool one_row;
      };
      for (Case c : {Case{1, 1, 1, false}, Case{256, 256, 1, false}, Case{1, 1, 8192, false}, Case{512, 64, 1, true}}) {
        INFO(Describe(params) << (f16_math ? ", float16 products" : ", float32 products") << ", tile " << tile.forced << ", Q x" << c.q
                              << (c.one_row ? " (row 37 only)" : "") << ", K x" << c.k << ", V x" << c.v);
        std::vector<float> q = RandomValues(s.q_elements(), params.dtype, 21, c.one_row ? 1.0f : c.q);
        if (c.one_row) {
          for (uint32_t d = 0; d < s.head_dim; ++d) q[37 * s.head_dim + d] *= c.q;
        }
        const ForwardRun run = RunForwardWith(context, params, q, RandomValues(s.kv_elements(), params.dtype, 22, c.k),
                                              RandomValues(s.kv_elements(), params.dtype, 23, c.v));
        CHECK(run.o_error <= ForwardTolerance(params.dtype));
        CHECK(run.lse_error <= ForwardTolerance(params.dtype));
      }
      // The worst case for a float16 partial sum of P V: every P 1 (Q = 0) and V of one sign.
      // Just under the guard (2000-2046: the float16 path's precision at its largest sums); V of
      // 5000-5996, whose float16 partials of 16 keys would overflow (a guard of 8192 or more fails
      // here), must take float32 products.
      for (float v_base : {2000.0f, 5000.0f}) {
        INFO(Describe(params) << (f16_math ? ", float16 products" : ", float32 products") << ", tile " << tile.forced
                              << ", Q = 0, V " << v_base << " + ...");
        std::vector<float> v(s.kv_elements());
        // Values float16 holds exactly: steps of 2 below 4096, of 4 above.
        for (uint64_t i = 0; i < v.size(); ++i) v[i] = v_base + (v_base < 4096 ? 2.0f * float(i % 24) : 4.0f * float(i % 250));
        const ForwardRun run = RunForwardWith(context, params, std::vector<float>(s.q_elements(), 0.0f),
                                              RandomValues(s.kv_elements(), params.dtype, 22), v);
        CHECK(run.o_error <= ForwardTolerance(params.dtype));
        CHECK(run.lse_error <= ForwardTolerance(params.dtype));
      }
    }
  }
  RequireNoValidationMessages();
}
