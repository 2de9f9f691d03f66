// Sliding windows (docs/design.md, "What is computed"): forward and backward against the float64
// reference over windows of every kind, decode shapes, which key tiles the kernels visit, and the
// parameter checks. Sequences, chunked loops and non-finite values with a window are in
// test_sequences.cc and test_nonfinite.cc.
#include <catch2/catch.hpp>
#include <vkflash/diagnostics.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "reference_attention.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

// Windows of every kind: one key (the diagonal), left only, right only, both sides, wider than
// the sequence, and with causal (which bounds the right at 0).
struct WindowCase {
  AttentionWindow window;
  bool causal;
};
const WindowCase kWindows[] = {{{0, 0}, false}, {{5, -1}, false}, {{-1, 3}, false}, {{7, 2}, false},
                               {{1000, 1000}, false}, {{16, -1}, true}, {{0, 0}, true}};

// Shapes with tails that are no multiple of a tile, Nq != Nk both ways, GQA, several tiles of the
// tensor-core kernels, head dims the register-tiled and per-row scalar kernels take.
const std::vector<AttentionShape> kShapes = {
    {1, 2, 2, 7, 13, 32}, {2, 4, 2, 64, 64, 64}, {1, 3, 1, 37, 101, 80}, {1, 2, 2, 100, 31, 96},
    {1, 1, 1, 41, 41, 128}, {1, 2, 1, 9, 17, 3}, {1, 2, 1, 300, 517, 64}, {1, 2, 1, 257, 255, 128},
};

std::vector<AttentionParams> WindowSweep(const std::vector<AttentionShape>& shapes) {
  std::vector<AttentionParams> sweep;
  for (const AttentionShape& shape : shapes) {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
      for (const WindowCase& w : kWindows) {
        AttentionParams p = MakeParams(shape, dtype, w.causal);
        p.window = w.window;
        sweep.push_back(p);
      }
    }
  }
  return sweep;
}

}  // namespace

TEST_CASE("sliding windows: forward matches the float64 reference", "[forward][window]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 9000;
  for (const AttentionParams& p : WindowSweep(kShapes)) CheckForwardAgainstReference(context, p, seed++);
}

TEST_CASE("sliding windows: backward matches the float64 reference gradients", "[backward][window]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 9500;
  for (const AttentionParams& p : WindowSweep({{1, 2, 2, 7, 13, 32}, {1, 4, 2, 150, 170, 64}, {1, 2, 1, 130, 97, 128},
                                               {1, 3, 1, 37, 61, 80}, {1, 2, 1, 9, 17, 3}})) {
    INFO(Describe(p));
    const BackwardRun run = RunBackwardCase(context, p, seed++);
    CHECK(run.dq_error <= BackwardTolerance(p.dtype));
    CHECK(run.dk_error <= BackwardTolerance(p.dtype));
    CHECK(run.dv_error <= BackwardTolerance(p.dtype));
    RequireNoValidationMessages();
  }
}

TEST_CASE("sliding windows: rows that see no key get zeros, -inf and zero gradients", "[forward][backward][window]") {
  Context& context = SharedContext(Knobs::kDevice);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    // Nq > Nk with the window (0, 0): row i sees key i - 40 only, so rows 0..39 see none.
    AttentionParams p = MakeParams({1, 2, 1, 50, 10, 64}, dtype, false);
    p.window = {0, 0};
    INFO(Describe(p));
    const ForwardRun forward = RunForwardCase(context, p, 31);
    CHECK(forward.o_error <= ForwardTolerance(dtype));
    const BackwardRun backward = RunBackwardCase(context, p, 32);
    CHECK(backward.dq_error <= BackwardTolerance(dtype));
    CHECK(backward.dk_error <= BackwardTolerance(dtype));
    for (uint32_t h = 0; h < 2; ++h) {
      for (uint32_t row = 0; row < 40; ++row) {
        REQUIRE(forward.lse[h * 50 + row] == -std::numeric_limits<float>::infinity());
        for (uint32_t d = 0; d < 64; ++d) {
          REQUIRE(forward.o[(h * 50 + row) * 64 + d] == 0.0f);
          REQUIRE(backward.dq[(h * 50 + row) * 64 + d] == 0.0f);
        }
      }
    }
    // Causal with a left side of 0 over Nq > Nk: rows 0..49 see no key, the others one each.
    p = MakeParams({1, 1, 1, 70, 20, 32}, dtype, true);
    p.window = {0, -1};
    CheckForwardAgainstReference(context, p, 33);
    RequireNoValidationMessages();
  }
}

TEST_CASE("sliding windows over a KV cache: decode and speculative rows", "[forward][decode][window]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 9700;
  for (bool causal : {false, true}) {
    // One row over 3000 keys, GQA 4:1: the window's 1024 keys sit at the end of the cache.
    AttentionParams p = MakeParams({2, 8, 2, 1, 3000, 128}, DataType::kFloat16, causal);
    p.window = {1023, causal ? -1 : 0};
    RequireDecodeWhereUsed(context, p);
    CheckForwardAgainstReference(context, p, seed++);
    // Speculative rows: each row's window starts at its own key.
    p = MakeParams({1, 8, 2, 4, 700, 64}, DataType::kFloat16, causal);
    p.window = {100, causal ? -1 : 1};
    RequireDecodeWhereUsed(context, p);
    CheckForwardAgainstReference(context, p, seed++);
    // A window two keys wide, where most split-K parts have no key.
    p = MakeParams({1, 4, 1, 2, 5000, 64}, DataType::kFloat16, causal);
    p.window = {1, causal ? -1 : 0};
    RequireDecodeWhereUsed(context, p);
    CheckForwardAgainstReference(context, p, seed++);
  }
}

TEST_CASE("sliding windows: key tiles outside every row's window are never visited", "[forward][window][instrument]") {
  // The instrumented (per-row scalar) forward writes statistics for each (row, key tile) it
  // visits: with NaN beforehand, a tile left NaN was not visited. A workgroup of Br rows visits
  // the tiles that its rows' windows touch, and no other.
  Context& context = SharedContext(Knobs::kDevice);
  for (const AttentionWindow window : {AttentionWindow{20, 5}, AttentionWindow{0, 0}, AttentionWindow{70, -1}}) {
    AttentionParams p = MakeParams({1, 1, 1, 200, 230, 16}, DataType::kFloat32, false);
    p.window = window;
    INFO(Describe(p));
    const AttentionShape& s = p.shape;
    auto choice = ChooseInstrumentedForwardKernel(context, p);
    REQUIRE(choice.ok());
    const uint32_t br = choice->block_q, bc = choice->block_kv, tiles = (s.kv_len + bc - 1) / bc;
    const auto q = RandomValues(s.q_elements(), p.dtype, 1), k = RandomValues(s.kv_elements(), p.dtype, 2);
    const auto v = RandomValues(s.kv_elements(), p.dtype, 3);
    auto bytes = [](const std::vector<float>& x) {
      std::vector<uint8_t> b(x.size() * 4);
      std::memcpy(b.data(), x.data(), b.size());
      return b;
    };
    Buffer qb = UploadedBuffer(context, bytes(q)), kb = UploadedBuffer(context, bytes(k)), vb = UploadedBuffer(context, bytes(v));
    Buffer ob = UploadedBuffer(context, std::vector<uint8_t>(q.size() * 4));
    const size_t stats_floats = ForwardStatsBytes(s, *choice) / 4;
    Buffer stats = UploadedBuffer(context, bytes(std::vector<float>(stats_floats, NAN)));
    REQUIRE(InstrumentedForward(context, p, {qb.view(), kb.view(), vb.view(), ob.view(), {}}, stats.view()).ok());
    std::vector<float> got(stats_floats);
    REQUIRE(context.Download(stats.view(), got.data(), got.size() * 4).ok());

    const int64_t shift = int64_t(s.kv_len) - s.q_len;
    uint32_t visited = 0;
    for (uint32_t i = 0; i < s.q_len; ++i) {
      // The keys the rows of i's workgroup see, from the contract.
      const int64_t first_row = i / br * br, last_row = std::min<int64_t>(first_row + br, s.q_len) - 1;
      const int64_t first_key = std::max<int64_t>(window.left < 0 ? 0 : first_row + shift - window.left, 0);
      const int64_t end_key =
          std::min<int64_t>(window.right < 0 ? s.kv_len : last_row + shift + window.right + 1, s.kv_len);
      for (uint32_t t = 0; t < tiles; ++t) {
        const bool expected = first_key < end_key && int64_t(t + 1) * bc > first_key && int64_t(t) * bc < end_key;
        INFO("row " << i << " tile " << t << " (Br=" << br << " Bc=" << bc << ")");
        REQUIRE(!std::isnan(got[(uint64_t(i) * tiles + t) * 5 + 1]) == expected);
        visited += expected;
      }
    }
    CHECK(visited < s.q_len * tiles);  // the window leaves tiles out
    RequireNoValidationMessages();
  }
}

TEST_CASE("window parameters: checked, counted, and refused before anything runs", "[api][window]") {
  AttentionParams p = MakeParams({2, 4, 2, 10, 12, 16}, DataType::kFloat32, false);
  CHECK(VisiblePairs(p) == 2ull * 4 * 10 * 12);
  p.causal = true;  // row i sees i + 3 keys
  CHECK(VisiblePairs(p) == 2ull * 4 * (3 * 10 + 45));
  p.window = {2, -1};  // with causal: keys i .. i + 2, all inside [0, 12)
  CHECK(VisiblePairs(p) == 2ull * 4 * 10 * 3);
  p.causal = false;
  p.window = {0, 0};
  CHECK(VisiblePairs(p) == 2ull * 4 * 10);
  p.kv_lengths = {12, 1};  // sequence 1: Nk = 1, the diagonal at i - 9: only row 9 sees key 0
  CHECK(VisiblePairs(p) == 4ull * (10 + 1));
  p.kv_lengths.clear();

  for (const AttentionWindow bad : {AttentionWindow{-2, 0}, AttentionWindow{0, -5}}) {
    p.window = bad;
    const Status status = ValidateAttentionParams(p);
    CHECK(status.code() == ErrorCode::kInvalidArgument);
    CHECK(status.message().find("window") != std::string::npos);
  }
  p.causal = true;
  p.window = {3, 2};
  CHECK(ValidateAttentionParams(p).code() == ErrorCode::kInvalidArgument);
  p.window = {3, 0};
  CHECK(ValidateAttentionParams(p).ok());

  // A refused call writes nothing.
  Context& context = SharedContext(Knobs::kDevice);
  p.window = {3, 2};
  const std::vector<uint8_t> marked(p.shape.q_elements() * 4, 0x5a);
  Buffer q = UploadedBuffer(context, std::vector<uint8_t>(p.shape.q_elements() * 4));
  Buffer k = UploadedBuffer(context, std::vector<uint8_t>(p.shape.kv_elements() * 4));
  Buffer v = UploadedBuffer(context, std::vector<uint8_t>(p.shape.kv_elements() * 4));
  Buffer o = UploadedBuffer(context, marked);
  CHECK(context.Forward(p, {q.view(), k.view(), v.view(), o.view()}).code() == ErrorCode::kInvalidArgument);
  std::vector<uint8_t> after(marked.size());
  REQUIRE(context.Download(o.view(), after.data(), after.size()).ok());
  CHECK(after == marked);
  RequireNoValidationMessages();
}
