// Score variants (the comment above AttentionParams; docs/design.md, "What is computed"): softcap,
// ALiBi slopes per head or per batch entry and head, and attention sinks with their gradient,
// alone and together with causal masks, windows, GQA, Nq != Nk, decode shapes and KV lengths,
// forward and backward against the float64 reference (itself checked against PyTorch's autograd);
// rows that see no key; and the parameter and buffer checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "half.h"
#include "reference_attention.h"
#include "storage_bytes.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// One combination of variants; the slopes and sinks are made per shape.
struct ScoreCase {
  float softcap = 0.0f;
  AlibiSlopes alibi = AlibiSlopes::kNone;
  bool sinks = false;
  bool causal = false;
  AttentionWindow window;
};

// ALiBi's geometric slopes 2^(-8 (h + 1) / Hq), per batch entry scaled by (b + 2) / 2 so that
// entries differ.
std::vector<float> Slopes(const AttentionParams& p) {
  const uint32_t hq = p.shape.q_heads, entries = p.alibi == AlibiSlopes::kPerBatchHead ? p.shape.batch : 1;
  std::vector<float> slopes;
  for (uint32_t b = 0; b < entries; ++b)
    for (uint32_t h = 0; h < hq; ++h)
      slopes.push_back(float(std::exp2(-8.0 * (h + 1) / hq) * (p.alibi == AlibiSlopes::kPerHead ? 1.0 : (b + 2) / 2.0)));
  return slopes;
}

// Sinks near a row's LSE (about log Nk for unit scores), so that P_sink is neither 0 nor 1.
std::vector<float> Sinks(const AttentionParams& p, uint32_t seed) {
  std::vector<float> sinks = RandomValues(p.shape.q_heads, DataType::kFloat32, seed, 1.5f);
  for (float& x : sinks) x += float(std::log(std::max(p.shape.kv_len, 1u)));
  return sinks;
}

ScoreValues ValuesFor(const AttentionParams& p, uint32_t seed) {
  ScoreValues values;
  if (p.alibi != AlibiSlopes::kNone) values.alibi_slopes = Slopes(p);
  if (p.sinks) values.sinks = Sinks(p, seed);
  return values;
}

AttentionParams WithCase(AttentionParams p, const ScoreCase& c) {
  p.softcap = c.softcap;
  p.alibi = c.alibi;
  p.sinks = c.sinks;
  p.causal = c.causal;
  p.window = c.window;
  return p;
}

// Each combination over shapes x {float32, float16}.
std::vector<AttentionParams> Sweep(const std::vector<AttentionShape>& shapes, const std::vector<ScoreCase>& cases) {
  std::vector<AttentionParams> sweep;
  for (const AttentionShape& shape : shapes)
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16})
      for (const ScoreCase& c : cases) sweep.push_back(WithCase(MakeParams(shape, dtype, false), c));
  return sweep;
}

// Tails that are no multiple of a tile, Nq != Nk both ways, GQA and MQA, several tensor-core
// tiles, head dims the register-tiled and per-row scalar kernels take.
const std::vector<AttentionShape> kForwardShapes = {
    {1, 2, 2, 7, 13, 32}, {2, 4, 2, 64, 64, 64}, {1, 3, 1, 37, 101, 80},
    {1, 2, 2, 100, 31, 96}, {1, 2, 1, 300, 517, 64}, {1, 2, 1, 9, 17, 3},
};
const std::vector<AttentionShape> kBackwardShapes = {
    {1, 2, 2, 7, 13, 32}, {1, 4, 2, 150, 170, 64}, {2, 2, 1, 130, 97, 128}, {1, 3, 1, 37, 61, 80}, {1, 2, 1, 9, 17, 3},
};

// Softcaps that leave scores almost unchanged (Gemma 2's 50), bend them (5) and saturate them (0.5).
const std::vector<ScoreCase> kSoftcaps = {{50.0f}, {5.0f}, {0.5f}, {2.0f, AlibiSlopes::kNone, false, true}};
const std::vector<ScoreCase> kAlibis = {{0.0f, AlibiSlopes::kPerHead},
                                        {0.0f, AlibiSlopes::kPerBatchHead},
                                        {0.0f, AlibiSlopes::kPerHead, false, true},
                                        {0.0f, AlibiSlopes::kPerBatchHead, false, false, {9, 4}}};
const std::vector<ScoreCase> kSinks = {{0.0f, AlibiSlopes::kNone, true},
                                       {0.0f, AlibiSlopes::kNone, true, true},
                                       {0.0f, AlibiSlopes::kNone, true, false, {5, 0}}};
// The softcaps of kSoftcaps again: each distinct cap is a pipeline of its own (a specialization
// constant), and building pipelines is most of these tests' time on lavapipe.
const std::vector<ScoreCase> kCombined = {
    {50.0f, AlibiSlopes::kPerHead, true},
    {5.0f, AlibiSlopes::kPerBatchHead, true, true},
    {0.5f, AlibiSlopes::kPerHead, true, true, {16, -1}},
    {2.0f, AlibiSlopes::kPerBatchHead, true, false, {7, 2}},
    {5.0f, AlibiSlopes::kPerHead, false, false, {0, 0}},
};

void CheckForwardSweep(const std::vector<AttentionParams>& sweep, uint32_t seed) {
  Context& context = SharedContext(Knobs::kDevice);
  for (const AttentionParams& p : sweep) {
    CheckForwardAgainstReference(context, p, seed, ValuesFor(p, seed + 500));
    ++seed;
  }
}

void CheckBackward(Context& context, const AttentionParams& p, uint32_t seed) {
  INFO(Describe(p));
  const BackwardRun run = RunBackwardCase(context, p, seed, ValuesFor(p, seed + 500));
  CHECK(run.dq_error <= BackwardTolerance(p.dtype));
  CHECK(run.dk_error <= BackwardTolerance(p.dtype));
  CHECK(run.dv_error <= BackwardTolerance(p.dtype));
  if (p.sinks) {
    INFO("dsinks " << run.dsinks[0] << " ... vs " << run.ref_dsinks[0] << " ...");
    CHECK(run.dsinks_error <= BackwardTolerance(p.dtype));
  }
  RequireNoValidationMessages();
}

void CheckBackwardSweep(const std::vector<AttentionParams>& sweep, uint32_t seed) {
  Context& context = SharedContext(Knobs::kDevice);
  for (const AttentionParams& p : sweep) CheckBackward(context, p, seed++);
}

}  // namespace

TEST_CASE("softcap: forward matches the float64 reference", "[forward][softcap]") {
  CheckForwardSweep(Sweep(kForwardShapes, kSoftcaps), 12000);
}

TEST_CASE("softcap: backward matches the float64 reference gradients", "[backward][softcap]") {
  CheckBackwardSweep(Sweep(kBackwardShapes, kSoftcaps), 12500);
}

// The kernels cap a base-2 score t as C2 - 2 C2 / (1 + 2^(2t / C)): past |2t / C| of about 128
// the power is inf or 0 in float32, which must still give +-C2 (common/score_mod.glsl softcapped).
// A large scale puts almost every score there (the cap's derivative vanishes for those pairs; the
// few small scores keep the gradients of dQ and dK).
TEST_CASE("softcap: scores far past the cap, where the kernels' exp2 overflows, give +-C", "[forward][backward][softcap]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 12800;
  for (const AttentionShape& shape : {AttentionShape{1, 2, 1, 37, 61, 64}, AttentionShape{2, 2, 2, 70, 45, 128}}) {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
      AttentionParams p = MakeParams(shape, dtype, false);
      p.softcap = 0.5f;
      p.scale = 64.0f;  // |scale q.k| mostly in the hundreds: 2t / C past 128
      INFO(Describe(p));
      CheckForwardAgainstReference(context, p, seed);
      const BackwardRun run = RunBackwardCase(context, p, seed + 1);
      CHECK(run.dq_error <= BackwardTolerance(dtype));
      CHECK(run.dk_error <= BackwardTolerance(dtype));
      CHECK(run.dv_error <= BackwardTolerance(dtype));
      RequireNoValidationMessages();
      seed += 2;
    }
  }
}

TEST_CASE("ALiBi: forward matches the float64 reference, slopes per head and per batch entry", "[forward][alibi]") {
  CheckForwardSweep(Sweep(kForwardShapes, kAlibis), 13000);
}

TEST_CASE("ALiBi: backward matches the float64 reference gradients", "[backward][alibi]") {
  CheckBackwardSweep(Sweep(kBackwardShapes, kAlibis), 13500);
}

TEST_CASE("ALiBi: distances down to -(2^22 - 1) and up to 2^21 - 65", "[forward][alibi]") {
  // The kernels make a distance a float by adding it to the bits of 1.5 * 2^23
  // (common/score_mod.glsl's small_int_to_float), exact for |distance| < 2^22 and off by about 2^22
  // or more past it. One row over 2^22 keys (distances 0 down to -(2^22 - 1)), and 2^21 - 64 rows
  // over 2 keys (distances up to 2^21 - 65, which the LSE carries; more rows would pass the query
  // tiles that 65535 workgroups hold); D = 1 keeps the tensors small. A slope of 2^-20 weighs the
  // farthest keys e^-4 of the nearest, so a far distance gone wrong moves O or the LSE.
  Context& context = SharedContext(Knobs::kDevice);
  ScoreValues values;
  values.alibi_slopes = {std::ldexp(1.0f, -20)};
  uint32_t seed = 13600;
  for (const AttentionShape& shape : {AttentionShape{1, 1, 1, 1, kMaxAlibiSequence, 1},
                                      AttentionShape{1, 1, 1, (1u << 21) - 64, 2, 1}}) {
    AttentionParams p = MakeParams(shape, DataType::kFloat32, false);
    p.alibi = AlibiSlopes::kPerHead;
    CheckForwardAgainstReference(context, p, seed++, values);
  }
}

TEST_CASE("sinks: forward matches the float64 reference", "[forward][sinks]") {
  CheckForwardSweep(Sweep(kForwardShapes, kSinks), 14000);
}

TEST_CASE("sinks: backward matches the float64 reference gradients, dsinks included", "[backward][sinks]") {
  CheckBackwardSweep(Sweep(kBackwardShapes, kSinks), 14500);
}

TEST_CASE("softcap, ALiBi and sinks together with causal masks and windows: forward",
          "[forward][softcap][alibi][sinks][window]") {
  CheckForwardSweep(Sweep(kForwardShapes, kCombined), 15000);
}

TEST_CASE("softcap, ALiBi and sinks together with causal masks and windows: backward",
          "[backward][softcap][alibi][sinks][window]") {
  CheckBackwardSweep(Sweep(kBackwardShapes, kCombined), 15500);
}

TEST_CASE("score variants: rows that see no key get zeros, the sink or -inf, and zero gradients",
          "[forward][backward][softcap][alibi][sinks]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 16000;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (bool sinks : {true, false}) {
      // Causal with Nq > Nk: rows 0..39 see no key, the others 1..10 keys.
      AttentionParams p = MakeParams({2, 4, 2, 50, 10, 64}, dtype, true);
      p.softcap = 20.0f;
      p.alibi = AlibiSlopes::kPerBatchHead;
      p.sinks = sinks;
      INFO(Describe(p));
      const ScoreValues values = ValuesFor(p, seed);
      const ForwardRun forward = RunForwardCase(context, p, seed, values);
      CHECK(forward.o_error <= ForwardTolerance(dtype));
      CHECK(forward.lse_error <= ForwardTolerance(dtype));
      const BackwardRun backward = RunBackwardCase(context, p, seed + 1, values);
      CHECK(backward.dq_error <= BackwardTolerance(dtype));
      CHECK(backward.dk_error <= BackwardTolerance(dtype));
      CHECK(backward.dv_error <= BackwardTolerance(dtype));
      for (uint32_t bh = 0; bh < 2 * 4; ++bh) {
        for (uint32_t row = 0; row < 40; ++row) {
          INFO("batch entry and head " << bh << ", row " << row);
          const uint64_t at = uint64_t(bh) * 50 + row;
          if (sinks) REQUIRE(IsSinkLse(forward.lse[at], values.sinks[bh % 4]));
          else REQUIRE(forward.lse[at] == -kInf);
          for (uint32_t d = 0; d < 64; ++d) {
            REQUIRE(forward.o[at * 64 + d] == 0.0f);
            REQUIRE(backward.dq[at * 64 + d] == 0.0f);
          }
        }
      }
      if (sinks) {
        for (float g : backward.dsinks) REQUIRE(std::isfinite(g));
        CHECK(backward.dsinks_error <= BackwardTolerance(dtype));
      }
      RequireNoValidationMessages();
      seed += 2;
    }
    // A window (0, 0) over Nq > Nk: rows 0..29 see none, the others one key each, whose P is
    // 1 - P_sink.
    AttentionParams p = MakeParams({1, 2, 1, 40, 10, 32}, dtype, false);
    p.window = {0, 0};
    p.sinks = true;
    p.alibi = AlibiSlopes::kPerHead;
    CheckForwardAgainstReference(context, p, seed, ValuesFor(p, seed));
    CheckBackward(context, p, seed + 1);
    seed += 2;
  }
}

TEST_CASE("sinks: rows whose keys' P lie below float16's normal range keep O's precision", "[forward][backward][sinks]") {
  // Q = 0 and a sink of 15.72: every key's P is e^-15.72 = 2.5 * 2^-24 of the sink's, float16
  // subnormals, yet O (about 0.02 with V in [500, 1000)) is well inside float16's range. Kernels
  // that round P to float16 must do so relative to the keys' own largest P (found by a fuzz: a
  // 20% error in the scalar forward's float16 products).
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams p = MakeParams({1, 2, 1, 64, 173, 64}, DataType::kFloat16, false);
  p.sinks = true;
  INFO(Describe(p));
  const AttentionShape& s = p.shape;
  std::vector<float> v = RandomValues(s.kv_elements(), p.dtype, 16090, 250.0f);
  for (float& x : v) x = tools::RoundToHalf(750.0f + std::fabs(x) / 4.0f);  // [750, ~1000)
  const std::vector<float> q(s.q_elements(), 0.0f), k = RandomValues(s.kv_elements(), p.dtype, 16091);
  const ScoreValues sinks{{}, {15.72f, 15.72f}};
  const ForwardRun run = RunForwardWith(context, p, q, k, v, sinks);
  CHECK(run.o_error <= ForwardTolerance(p.dtype));
  CHECK(run.lse_error <= ForwardTolerance(p.dtype));
  RequireNoValidationMessages();

  // The gradients of the same rows from the scalar kernels, which keep P and dS in float32. The
  // tensor-core backward rounds P = exp(s - LSE), about 2^-22 here, to float16: a known limit of
  // the contract (docs/design.md), as in FlashAttention-2's float16 backward.
  ContextOptions options = ValidatedOptions();
  options.kernels = "scalar";
  auto scalar = Context::Create(options);
  REQUIRE(scalar.ok());
  CheckGradientErrors(RunBackwardWith(**scalar, p, q, k, v, RandomValues(s.q_elements(), p.dtype, 16092), sinks), p);
  RequireNoValidationMessages();
}

TEST_CASE("sinks: outputs below float16's smallest subnormal meet the float16 storage's allowance", "[forward][backward][sinks]") {
  // Q = 0 and a sink of 30: every key's P is e^-30 of the sink's, so O (about 1e-13) and the
  // gradients lie below anything float16 holds, while float32 holds them at its full precision.
  // float16 storage returns 0 there, which docs/design.md allows (an element below float16's normal
  // range may be off by its own size); float32 storage must meet its relative tolerance: that is
  // the kernels' check.
  Context& context = SharedContext(Knobs::kDevice);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    AttentionParams p = MakeParams({1, 2, 1, 8, 96, 64}, dtype, false);
    p.sinks = true;
    INFO(Describe(p));
    const AttentionShape& s = p.shape;
    const std::vector<float> q(s.q_elements(), 0.0f), k = RandomValues(s.kv_elements(), dtype, 16095),
        v = RandomValues(s.kv_elements(), dtype, 16096);
    const ScoreValues sinks{{}, {30.0f, 30.0f}};
    const ForwardRun run = RunForwardWith(context, p, q, k, v, sinks);
    const double largest = *std::max_element(run.ref_o.begin(), run.ref_o.end(), [](double a, double b) { return std::abs(a) < std::abs(b); });
    REQUIRE(std::abs(largest) < std::ldexp(1.0, -25));  // below half of float16's smallest subnormal
    CHECK(run.o_error <= ForwardTolerance(dtype));
    CHECK(run.lse_error <= ForwardTolerance(dtype));
    CheckGradientErrors(RunBackwardWith(context, p, q, k, v, RandomValues(s.q_elements(), dtype, 16097), sinks), p);
    RequireNoValidationMessages();
  }

  // The allowance itself: the norm of the elements below float16's normal range, for float16 only.
  const std::vector<double> tiny{1e-13, -3e-9, 2e-6, 5e-5};
  const std::vector<float> zeros(4, 0.0f);
  CHECK(tools::StoredRelativeError(zeros, tiny, DataType::kFloat16) == 0.0);
  CHECK(tools::StoredRelativeError(zeros, tiny, DataType::kFloat32) == 1.0);
  const std::vector<double> normal{1.0, -2.0, 0.5, 3e-5};  // one element below the normal range
  const std::vector<float> off{1.0f, -2.0f, 0.5f, 3e-5f + 1e-4f};
  const double excess = (1e-4 - 3e-5) / std::sqrt(1.0 + 4.0 + 0.25 + 9e-10);
  CHECK(tools::StoredRelativeError(off, normal, DataType::kFloat16) == Approx(excess).epsilon(1e-4));
}

TEST_CASE("sinks: -inf is no sink, and a large sink takes the whole row", "[forward][backward][sinks]") {
  Context& context = SharedContext(Knobs::kDevice);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    AttentionParams p = MakeParams({1, 4, 2, 33, 47, 64}, dtype, true);
    p.sinks = true;
    INFO(Describe(p));
    const ScoreValues values{{}, {-kInf, 0.0f, 40.0f, -3.0f}};
    CheckForwardAgainstReference(context, p, 16100, values);
    const BackwardRun run = RunBackwardCase(context, p, 16101, values);
    CheckGradientErrors(run, p);
    CHECK(run.dsinks[0] == 0.0f);  // P_sink = 0 in every row

    // Sinks of -inf are no sinks: O and LSE as without them (within the tolerance).
    const ForwardRun with_none = RunForwardCase(context, p, 16102, {{}, {-kInf, -kInf, -kInf, -kInf}});
    AttentionParams plain = p;
    plain.sinks = false;
    const ForwardRun without = RunForwardCase(context, plain, 16102);
    CHECK(tools::RelativeError(with_none.o, std::vector<double>(without.o.begin(), without.o.end())) <=
          ForwardTolerance(dtype));
    CHECK(tools::RelativeError(with_none.lse, std::vector<double>(without.lse.begin(), without.lse.end())) <=
          ForwardTolerance(dtype));
    RequireNoValidationMessages();
  }
}

TEST_CASE("sinks: a row that sees no key gets zeros and its sink's LSE, however far below every score", "[forward][sinks]") {
  // Causal with Nq > Nk (bottom-right): rows 0-13 see no key. Head 0's sink lies below the
  // coopmat2 forward's finite start for the running max (-1.7e38 in base 2): taken as the row's
  // max there, the sink weighed exp2(sink - floor) = 0 and O was 0 / 0.
  Context& context = SharedContext(Knobs::kDevice);
  const std::vector<float> sinks = {-1.5e38f, -1e30f, -3.0f, 0.5f};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    AttentionParams p = MakeParams({1, 4, 2, 47, 33, 64}, dtype, true);
    p.sinks = true;
    INFO(Describe(p));
    const ForwardRun run = RunForwardCase(context, p, 16160, {{}, sinks});
    const uint32_t rows = p.shape.q_len, dim = p.shape.head_dim, blind_rows = rows - p.shape.kv_len;
    for (uint32_t h = 0; h < 4; ++h) {
      for (uint32_t i = 0; i < blind_rows; ++i) {
        INFO("head " << h << " row " << i << " LSE " << run.lse[h * rows + i]);
        REQUIRE(std::fabs(run.lse[h * rows + i] - sinks[h]) <= 1e-6f * std::fabs(sinks[h]) + 1e-6f);
        for (uint32_t d = 0; d < dim; ++d) REQUIRE(run.o[(uint64_t(h) * rows + i) * dim + d] == 0.0f);
      }
    }
    CHECK(run.o_error <= ForwardTolerance(dtype));
    RequireNoValidationMessages();
  }
}

TEST_CASE("sinks: a sink of +inf or NaN makes its head's rows NaN, and no other head's", "[forward][sinks][nonfinite]") {
  // docs/design.md: such a sink makes its head's rows NaN. Heads 2 and 3 (the other KV head's)
  // must give the same bits as with finite sinks on heads 0 and 1.
  Context& context = SharedContext(Knobs::kDevice);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    AttentionParams p = MakeParams({1, 4, 2, 33, 47, 64}, dtype, true);
    p.sinks = true;
    INFO(Describe(p));
    const ForwardRun poisoned = RunForwardCase(context, p, 16150, {{}, {std::nanf(""), kInf, 0.5f, -kInf}});
    const ForwardRun finite = RunForwardCase(context, p, 16150, {{}, {0.0f, 0.0f, 0.5f, -kInf}});
    const uint64_t rows = p.shape.q_len, row_elements = rows * p.shape.head_dim;
    for (uint64_t i = 0; i < 2 * row_elements; ++i) REQUIRE(std::isnan(poisoned.o[i]));
    for (uint64_t i = 0; i < 2 * rows; ++i) REQUIRE(std::isnan(poisoned.lse[i]));
    CHECK(std::memcmp(poisoned.o.data() + 2 * row_elements, finite.o.data() + 2 * row_elements,
                      2 * row_elements * sizeof(float)) == 0);
    CHECK(std::memcmp(poisoned.lse.data() + 2 * rows, finite.lse.data() + 2 * rows, 2 * rows * sizeof(float)) == 0);
    CHECK(finite.o_error <= ForwardTolerance(dtype));
    RequireNoValidationMessages();
  }
}

TEST_CASE("score variants over a KV cache: decode and speculative rows", "[forward][backward][decode][softcap][alibi][sinks]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 17000;
  for (bool causal : {false, true}) {
    // One row over 3000 keys, GQA 4:1, with a window at the end of the cache.
    AttentionParams p = MakeParams({2, 8, 2, 1, 3000, 128}, DataType::kFloat16, causal);
    p.softcap = 30.0f;
    p.alibi = AlibiSlopes::kPerHead;
    p.sinks = true;
    CheckForwardAgainstReference(context, p, seed, ValuesFor(p, seed));
    p.window = {1023, causal ? -1 : 0};
    CheckForwardAgainstReference(context, p, seed + 1, ValuesFor(p, seed + 1));
    // Speculative rows, per-batch slopes, float32.
    p = MakeParams({2, 8, 2, 4, 700, 64}, DataType::kFloat32, causal);
    p.softcap = 10.0f;
    p.alibi = AlibiSlopes::kPerBatchHead;
    p.sinks = true;
    CheckForwardAgainstReference(context, p, seed + 2, ValuesFor(p, seed + 2));
    // Its gradients (a decode-shaped backward: few rows, many keys).
    CheckBackward(context, p, seed + 3);
    p = MakeParams({1, 4, 1, 1, 1500, 64}, DataType::kFloat16, causal);
    p.alibi = AlibiSlopes::kPerHead;
    p.sinks = true;
    CheckBackward(context, p, seed + 4);
    seed += 5;
  }
}

TEST_CASE("score variants with KV lengths: ALiBi's distances and causal alignment per sequence",
          "[forward][backward][sequences][softcap][alibi][sinks]") {
  // Packed [B, H, Nk, D] K and V of which sequence b uses its first kv_lengths[b] rows (the rest
  // NaN, never read); each sequence against the reference of that sequence alone, with its
  // batch entry's slopes. A length of 0: O = 0, LSE = the sink.
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 18000;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (bool causal : {false, true}) {
      AttentionParams p = MakeParams({3, 4, 2, 9, 40, 32}, dtype, causal);
      p.kv_lengths = {40, 17, 0};
      p.softcap = 8.0f;
      p.alibi = AlibiSlopes::kPerBatchHead;
      p.sinks = true;
      INFO(Describe(p));
      const AttentionShape& s = p.shape;
      const uint32_t d = s.head_dim;
      const ScoreValues values = ValuesFor(p, seed);
      std::vector<float> q = RandomValues(s.q_elements(), dtype, seed), d_o = RandomValues(s.q_elements(), dtype, seed + 1);
      std::vector<float> k = RandomValues(s.kv_elements(), dtype, seed + 2), v = RandomValues(s.kv_elements(), dtype, seed + 3);
      for (uint32_t b = 0; b < s.batch; ++b)
        for (uint32_t h = 0; h < s.kv_heads; ++h)
          for (uint64_t n = p.kv_lengths[b]; n < s.kv_len; ++n)
            for (uint32_t c = 0; c < d; ++c) {
              const uint64_t at = ((uint64_t(b) * s.kv_heads + h) * s.kv_len + n) * d + c;
              k[at] = v[at] = std::numeric_limits<float>::quiet_NaN();
            }
      // (The run's own reference, of the whole call without its lengths, is not looked at.)
      const BackwardRun run = RunBackwardWith(context, p, q, k, v, d_o, values);
      // The forward's O and LSE for the checks.
      Buffer bq = UploadedBuffer(context, tools::PackTensor(q, dtype)), bk = UploadedBuffer(context, tools::PackTensor(k, dtype));
      Buffer bv = UploadedBuffer(context, tools::PackTensor(v, dtype));
      Buffer bo = UploadedBuffer(context, std::vector<uint8_t>(s.q_elements() * DataTypeSize(dtype), 0xff));
      Buffer blse = UploadedBuffer(context, std::vector<uint8_t>(s.lse_elements() * 4, 0xff));
      Buffer slopes = UploadedFloats(context, values.alibi_slopes), sinks = UploadedFloats(context, values.sinks);
      const Status status = context.Forward(
          p, {bq.view(), bk.view(), bv.view(), bo.view(), blse.view(), {}, slopes.view(), sinks.view()});
      INFO(status.ToString());
      REQUIRE(status.ok());
      std::vector<uint8_t> o_bytes(s.q_elements() * DataTypeSize(dtype));
      std::vector<float> lse(s.lse_elements());
      REQUIRE(context.Download(bo.view(), o_bytes.data(), o_bytes.size()).ok());
      REQUIRE(context.Download(blse.view(), lse.data(), lse.size() * 4).ok());
      const std::vector<float> o = tools::UnpackTensor(o_bytes, dtype);

      tools::ReferenceBackward sums;  // dsinks over the sequences
      sums.dsinks.assign(s.q_heads, 0.0);
      sums.dsinks_terms.assign(s.q_heads, 0.0);
      if (dtype == DataType::kFloat16) sums.dsinks_storage_allowance.assign(s.q_heads, 0.0);
      for (uint32_t b = 0; b < s.batch; ++b) {
        INFO("sequence " << b << " of " << p.kv_lengths[b] << " keys");
        AttentionParams one = p;
        one.kv_lengths.clear();
        one.shape = {1, s.q_heads, s.kv_heads, s.q_len, uint32_t(p.kv_lengths[b]), d};
        one.alibi = AlibiSlopes::kPerHead;
        ScoreValues own = values;
        own.alibi_slopes.assign(values.alibi_slopes.begin() + b * s.q_heads, values.alibi_slopes.begin() + (b + 1) * s.q_heads);
        const uint64_t q_part = uint64_t(s.q_heads) * s.q_len * d, kv_part = uint64_t(s.kv_heads) * s.kv_len * d;
        auto slice = [](const std::vector<float>& x, uint64_t from, uint64_t count) {
          return std::vector<float>(x.begin() + from, x.begin() + from + count);
        };
        // K and V of sequence b: its first kv_lengths[b] rows of each head.
        std::vector<float> k_seq, v_seq;
        for (uint32_t h = 0; h < s.kv_heads; ++h) {
          const uint64_t from = b * kv_part + uint64_t(h) * s.kv_len * d, count = uint64_t(p.kv_lengths[b]) * d;
          const auto ks = slice(k, from, count), vs = slice(v, from, count);
          k_seq.insert(k_seq.end(), ks.begin(), ks.end());
          v_seq.insert(v_seq.end(), vs.begin(), vs.end());
        }
        const auto q_seq = slice(q, b * q_part, q_part), do_seq = slice(d_o, b * q_part, q_part);
        const auto fwd = tools::ReferenceAttentionForward(one, q_seq, k_seq, v_seq, own);
        const auto bwd = tools::ReferenceAttentionBackward(one, q_seq, k_seq, v_seq, do_seq, own);
        const uint64_t rows = uint64_t(s.q_heads) * s.q_len;
        CHECK(tools::StoredRelativeError(slice(o, b * q_part, q_part), fwd.o, dtype) <= ForwardTolerance(dtype));
        CHECK(tools::RelativeError(slice(lse, b * rows, rows), fwd.lse) <= ForwardTolerance(dtype));
        CHECK(tools::StoredRelativeError(slice(run.dq, b * q_part, q_part), bwd.dq, dtype) <= BackwardTolerance(dtype));
        std::vector<float> dk_seq, dv_seq;
        for (uint32_t h = 0; h < s.kv_heads; ++h) {
          const uint64_t from = b * kv_part + uint64_t(h) * s.kv_len * d, count = uint64_t(p.kv_lengths[b]) * d;
          const auto dks = slice(run.dk, from, count), dvs = slice(run.dv, from, count);
          dk_seq.insert(dk_seq.end(), dks.begin(), dks.end());
          dv_seq.insert(dv_seq.end(), dvs.begin(), dvs.end());
          // Rows past the length: zero gradients.
          for (uint64_t at = from + count; at < from + uint64_t(s.kv_len) * d; ++at) {
            REQUIRE(run.dk[at] == 0.0f);
            REQUIRE(run.dv[at] == 0.0f);
          }
        }
        CHECK(tools::StoredRelativeError(dk_seq, bwd.dk, dtype) <= BackwardTolerance(dtype));
        CHECK(tools::StoredRelativeError(dv_seq, bwd.dv, dtype) <= BackwardTolerance(dtype));
        for (uint32_t h = 0; h < s.q_heads; ++h) {
          sums.dsinks[h] += bwd.dsinks[h];
          sums.dsinks_terms[h] += bwd.dsinks_terms[h];
          if (dtype == DataType::kFloat16) sums.dsinks_storage_allowance[h] += bwd.dsinks_storage_allowance[h];
        }
        if (p.kv_lengths[b] == 0) {
          for (uint64_t r = 0; r < rows; ++r) REQUIRE(IsSinkLse(lse[b * rows + r], values.sinks[r / s.q_len]));
        }
      }
      CHECK(DsinksError(dtype, run.dsinks, sums) <= BackwardTolerance(dtype));
      RequireNoValidationMessages();
      seed += 4;
    }
  }
}

TEST_CASE("dsinks are bit-identical run after run", "[backward][sinks]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams p = MakeParams({2, 4, 2, 200, 230, 64}, DataType::kFloat16, true);
  p.sinks = true;
  p.softcap = 15.0f;
  const ScoreValues values = ValuesFor(p, 19000);
  const BackwardRun first = RunBackwardCase(context, p, 19001, values);
  const BackwardRun second = RunBackwardCase(context, p, 19001, values);
  REQUIRE(first.dsinks.size() == 4);
  CHECK(std::memcmp(first.dsinks.data(), second.dsinks.data(), 4 * sizeof(float)) == 0);
  CHECK(std::memcmp(first.dq.data(), second.dq.data(), first.dq.size() * sizeof(float)) == 0);
  CHECK(first.dsinks_error <= BackwardTolerance(p.dtype));
  RequireNoValidationMessages();
}

TEST_CASE("score variant parameters and buffers: checked, and refused before anything runs",
          "[api][softcap][alibi][sinks]") {
  AttentionParams p = MakeParams({2, 4, 2, 10, 12, 16}, DataType::kFloat32, false);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, -1.0f, -1e-30f, 1e-40f}) {
    p.softcap = bad;
    const Status status = ValidateAttentionParams(p);
    INFO("softcap " << bad << ": " << status.ToString());
    CHECK(status.code() == ErrorCode::kInvalidArgument);
    CHECK(status.message().find("softcap") != std::string::npos);
  }
  for (float good : {0.0f, 1e-3f, 50.0f}) {
    p.softcap = good;
    CHECK(ValidateAttentionParams(p).ok());
  }
  p.alibi = AlibiSlopes(7);
  CHECK(ValidateAttentionParams(p).code() == ErrorCode::kInvalidArgument);
  p.alibi = AlibiSlopes::kPerBatchHead;
  p.sinks = true;
  CHECK(ValidateAttentionParams(p).ok());
  // ALiBi's distances are exact floats up to 2^22 queries and keys; past that, refused.
  for (uint32_t AttentionShape::*length : {&AttentionShape::q_len, &AttentionShape::kv_len}) {
    const uint32_t before = p.shape.*length;
    p.shape.*length = kMaxAlibiSequence;
    CHECK(ValidateAttentionParams(p).ok());
    p.shape.*length = kMaxAlibiSequence + 1;
    const Status status = ValidateAttentionParams(p);
    INFO(status.ToString());
    CHECK(status.code() == ErrorCode::kUnsupported);
    CHECK(status.message().find("ALiBi") != std::string::npos);
    p.alibi = AlibiSlopes::kNone;
    CHECK(ValidateAttentionParams(p).ok());
    p.alibi = AlibiSlopes::kPerBatchHead;
    p.shape.*length = before;
  }
  // With cu_seqlens a distance lies within one sequence: the longest sequence counts, not the
  // packed rows.
  p.shape.q_len = kMaxAlibiSequence + 10;
  p.cu_seqlens_q = {0, int32_t(kMaxAlibiSequence / 2), int32_t(kMaxAlibiSequence + 10)};
  CHECK(ValidateAttentionParams(p).ok());
  p.cu_seqlens_q = {0, 5, int32_t(kMaxAlibiSequence + 10)};
  CHECK(ValidateAttentionParams(p).code() == ErrorCode::kUnsupported);
  p.cu_seqlens_q.clear();
  p.shape.q_len = 10;
  p.alibi = AlibiSlopes::kNone;
  p.sinks = false;

  // Calls whose slopes or sinks are missing or too small: kInvalidArgument, O and the gradients
  // as they were.
  Context& context = SharedContext(Knobs::kDevice);
  const AttentionShape& s = p.shape;
  const std::vector<uint8_t> marked(s.q_elements() * 4, 0x5a);
  Buffer q = UploadedBuffer(context, std::vector<uint8_t>(s.q_elements() * 4));
  Buffer k = UploadedBuffer(context, std::vector<uint8_t>(s.kv_elements() * 4));
  Buffer v = UploadedBuffer(context, std::vector<uint8_t>(s.kv_elements() * 4));
  Buffer lse = UploadedBuffer(context, std::vector<uint8_t>(s.lse_elements() * 4));
  Buffer d_o = UploadedBuffer(context, std::vector<uint8_t>(s.q_elements() * 4));
  Buffer o = UploadedBuffer(context, marked), dq = UploadedBuffer(context, marked);
  Buffer dk = UploadedBuffer(context, std::vector<uint8_t>(s.kv_elements() * 4));
  Buffer dv = UploadedBuffer(context, std::vector<uint8_t>(s.kv_elements() * 4));
  Buffer per_head = UploadedFloats(context, std::vector<float>(s.q_heads, 0.5f));
  Buffer per_batch_head = UploadedFloats(context, std::vector<float>(s.batch * s.q_heads, 0.5f));
  Buffer short_by_one = UploadedFloats(context, std::vector<float>(s.q_heads - 1, 0.5f));
  Buffer dsinks = UploadedFloats(context, std::vector<float>(s.q_heads));
  const BufferView per_head_short{per_head.handle(), 0, (s.q_heads - 1) * 4};  // a view smaller than its buffer

  struct Bad {
    const char* what;
    AlibiSlopes alibi;
    bool sinks;
    BufferView slopes, sinks_view, dsinks;
  };
  const Bad bad_calls[] = {
      {"ALiBi without slopes", AlibiSlopes::kPerHead, false, {}, {}, {}},
      {"slopes [Hq - 1]", AlibiSlopes::kPerHead, false, short_by_one.view(), {}, {}},
      {"a slopes view of Hq - 1", AlibiSlopes::kPerHead, false, per_head_short, {}, {}},
      {"per-batch slopes in an [Hq] buffer", AlibiSlopes::kPerBatchHead, false, per_head.view(), {}, {}},
      {"sinks without a buffer", AlibiSlopes::kNone, true, {}, {}, {}},
      {"sinks [Hq - 1]", AlibiSlopes::kNone, true, {}, short_by_one.view(), {}},
      {"a sinks view of Hq - 1", AlibiSlopes::kNone, true, {}, per_head_short, {}},
      // a view given where its variant is off would silently compute plain attention
      {"slopes without ALiBi", AlibiSlopes::kNone, false, per_head.view(), {}, {}},
      {"sinks without params.sinks", AlibiSlopes::kNone, false, {}, per_head.view(), {}},
  };
  for (const Bad& call : bad_calls) {
    INFO(call.what);
    AttentionParams bad = p;
    bad.alibi = call.alibi;
    bad.sinks = call.sinks;
    ForwardBuffers f{q.view(), k.view(), v.view(), o.view(), lse.view(), {}, call.slopes, call.sinks_view};
    const Status forward = context.Forward(bad, f);
    INFO(forward.ToString());
    CHECK(forward.code() == ErrorCode::kInvalidArgument);
    BackwardBuffers b;
    b.q = q.view();
    b.k = k.view();
    b.v = v.view();
    b.o = o.view();
    b.lse = lse.view();
    b.d_o = d_o.view();
    b.dq = dq.view();
    b.dk = dk.view();
    b.dv = dv.view();
    b.alibi_slopes = call.slopes;
    b.sinks = call.sinks_view;
    b.dsinks = call.sinks ? dsinks.view() : BufferView{};
    const Status backward = context.Backward(bad, b);
    INFO(backward.ToString());
    CHECK(backward.code() == ErrorCode::kInvalidArgument);
  }
  // A dsinks buffer too small for Hq floats.
  {
    AttentionParams bad = p;
    bad.sinks = true;
    BackwardBuffers b;
    b.q = q.view();
    b.k = k.view();
    b.v = v.view();
    b.o = o.view();
    b.lse = lse.view();
    b.d_o = d_o.view();
    b.dq = dq.view();
    b.dk = dk.view();
    b.dv = dv.view();
    b.sinks = per_head.view();
    b.dsinks = short_by_one.view();
    CHECK(context.Backward(bad, b).code() == ErrorCode::kInvalidArgument);
  }
  // A softcap the params refuse, in a call.
  {
    AttentionParams bad = p;
    bad.softcap = -2.0f;
    CHECK(context.Forward(bad, {q.view(), k.view(), v.view(), o.view(), lse.view()}).code() == ErrorCode::kInvalidArgument);
  }
  std::vector<uint8_t> after(marked.size());
  REQUIRE(context.Download(o.view(), after.data(), after.size()).ok());
  CHECK(after == marked);
  REQUIRE(context.Download(dq.view(), after.data(), after.size()).ok());
  CHECK(after == marked);
  // Slopes of the right size for each shape, and sinks: the call runs.
  p.alibi = AlibiSlopes::kPerBatchHead;
  p.sinks = true;
  CHECK(context.Forward(p, {q.view(), k.view(), v.view(), o.view(), lse.view(), {}, per_batch_head.view(), per_head.view()})
            .ok());
  RequireNoValidationMessages();
}
