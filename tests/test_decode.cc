// The decode family (shaders/decode/): few query rows per KV head over many keys, packed per
// grouped-query group and split over workgroups, against the float64 reference. On a device
// without it (no subgroup operations) the same calls run another family and must still be right.
#include <catch2/catch.hpp>
#include <vkflash/device_info.hpp>
#include <vkflash/diagnostics.hpp>

#include <array>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "half.h"
#include "reference_attention.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();

AttentionParams DecodeParams(AttentionShape shape, bool causal) { return MakeParams(shape, DataType::kFloat16, causal); }

// A split-K call's checks: O and LSE within the reference's tolerance, the same bits on a rerun and,
// once the one-part call (splits == 1) has filled `one_part` with its O, within float16 rounding of
// it (parts merged by their LSE give one part's O).
void CheckSplitRun(Context& context, const AttentionParams& params, uint32_t seed, const ScoreValues& values,
                   uint32_t splits, std::vector<float>* one_part) {
  const ForwardRun first = RunForwardCase(context, params, seed, values);
  CHECK(first.o_error <= ForwardTolerance(params.dtype));
  CHECK(first.lse_error <= ForwardTolerance(params.dtype));
  const ForwardRun again = RunForwardCase(context, params, seed, values);
  REQUIRE(std::memcmp(first.o.data(), again.o.data(), first.o.size() * sizeof(float)) == 0);
  REQUIRE(std::memcmp(first.lse.data(), again.lse.data(), first.lse.size() * sizeof(float)) == 0);
  if (splits == 1) {
    *one_part = first.o;
  } else {
    CHECK(tools::RelativeError(first.o, std::vector<double>(one_part->begin(), one_part->end())) <= 1e-3);
  }
}

// Every (query heads per KV head, q_len) pair over 2 KV heads and a batch of 2, at each kv_len and
// head dim, causal and not, against the reference, on the decode kernel where it applies.
void CheckPackedRows(const std::vector<std::pair<uint32_t, uint32_t>>& groups_and_rows,
                     const std::vector<uint32_t>& kv_lens, const std::vector<uint32_t>& head_dims, uint32_t seed) {
  Context& context = SharedContext(Knobs::kDevice);
  for (auto [group, q_len] : groups_and_rows) {
    for (uint32_t kv_len : kv_lens) {
      for (uint32_t head_dim : head_dims) {
        for (bool causal : {false, true}) {
          const AttentionParams params = DecodeParams({2, 2 * group, 2, q_len, kv_len, head_dim}, causal);
          RequireDecodeWhereUsed(context, params);
          CheckForwardAgainstReference(context, params, seed++);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("decode: one query row over 1 to 33k keys, grouped-query groups 1 to 8", "[forward][decode]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 2000;
  for (uint32_t group : {1u, 2u, 4u, 8u}) {
    const uint32_t kv_heads = group == 8 ? 1 : 2;
    for (uint32_t kv_len : {1u, 2u, 64u, 65u, 1000u, 4097u}) {
      for (uint32_t head_dim : {64u, 128u}) {
        for (bool causal : {false, true}) {
          const AttentionParams params = DecodeParams({1, group * kv_heads, kv_heads, 1, kv_len, head_dim}, causal);
          RequireDecodeWhereUsed(context, params);
          CheckForwardAgainstReference(context, params, seed++);
        }
      }
    }
  }
  // Long caches, batches, the smallest and largest head dims.
  for (const AttentionShape& shape : std::vector<AttentionShape>{
           {1, 8, 2, 1, 33000, 128}, {3, 8, 1, 1, 5000, 64}, {2, 4, 4, 1, 777, 8}, {1, 2, 1, 1, 3001, 256}}) {
    const AttentionParams params = DecodeParams(shape, seed % 2 == 0);
    RequireDecodeWhereUsed(context, params);
    CheckForwardAgainstReference(context, params, seed++);
  }
}

TEST_CASE("decode: a few query rows (speculative decoding) with the causal diagonal", "[forward][decode]") {
  // Packed rows group * q_len up to 8; kv_len below q_len leaves rows that see no key.
  CheckPackedRows({{1, 2}, {2, 3}, {4, 2}, {1, 8}, {2, 4}}, {1, 3, 100, 3000}, {128}, 2500);
}

TEST_CASE("decode: more packed rows than registers hold (tensor cores where they run)", "[forward][decode]") {
  // 12 to 64 packed rows, some not a multiple of 16; kv_len below q_len leaves rows that see no key,
  // 3000 splits the keys (the tensor-core tiles stream 64 or, at D = 64, 128 rows per step).
  CheckPackedRows({{4, 4}, {2, 6}, {1, 16}, {8, 5}, {4, 16}}, {1, 7, 3000}, {64, 128}, 2700);
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 2800;
  // The largest head dim.
  const AttentionParams params = DecodeParams({1, 8, 2, 4, 1500, 256}, true);
  RequireDecodeWhereUsed(context, params);
  CheckForwardAgainstReference(context, params, seed++);
}

TEST_CASE("decode: every lane layout of the register kernel's reduce-scatter, with sinks and a softcap",
          "[forward][decode][sinks][softcap]") {
  // The head dim sets the invocations per key group T (1 to 16 on a device with subgroups of 16 or
  // more) and the packed rows the keys per step (8 up to 4 rows, 4 up to 8; 1 or 2 where a key takes
  // several words per lane), so these cover lanes with several keys each (D = 8 and 24 without
  // shuffles, 16, 32), one key each (48), keys shared by 2 or 4 lanes (80, 96, 160, 192, 256);
  // D = 64 and 128 run in the tests around. Sinks start a row's sum in the first lanes only; the
  // softcap runs once per score, in the lane that holds it.
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 2600, variant = 0;
  const std::vector<std::pair<uint32_t, uint32_t>> groups_and_rows = {{1, 1}, {3, 2}, {8, 1}};
  for (uint32_t head_dim : {8u, 16u, 24u, 32u, 48u, 80u, 96u, 160u, 192u, 256u}) {
    for (auto [group, q_len] : groups_and_rows) {
      // Causal, sinks and softcap each on in turn, independently of the rows (periods 2, 4 and 5).
      AttentionParams params = DecodeParams({2, 2 * group, 2, q_len, 900, head_dim}, variant % 2 == 0);
      params.sinks = variant % 4 < 2;
      params.softcap = variant % 5 < 2 ? 20.0f : 0.0f;
      ++variant;
      ScoreValues values;
      if (params.sinks) {
        values.sinks = RandomValues(params.shape.q_heads, DataType::kFloat32, seed, 1.5f);
        for (float& x : values.sinks) x += std::log(900.0f);  // weighs like a few keys' sum
      }
      RequireDecodeWhereUsed(context, params);
      CheckForwardAgainstReference(context, params, seed++, values);
    }
  }
}

TEST_CASE("decode: split-K parts agree with one part, and give the same bits run after run", "[forward][decode][sinks]") {
  // 8 packed rows (the register kernel), 16 (the tensor-core one where it runs); one part fits
  // lavapipe's loop budget. With sinks (they join part 0 only), and with a window of the last 500
  // keys, which leaves the first parts no key: part 0 then carries the sink alone.
  struct Variant {
    bool sinks;
    int32_t window_left;  // -1: none
  };
  for (const AttentionShape& shape : {AttentionShape{2, 8, 2, 2, 3000, 64}, AttentionShape{2, 8, 2, 4, 3000, 64}})
  for (Variant variant : {Variant{false, -1}, Variant{true, -1}, Variant{true, 499}}) {
    AttentionParams params = DecodeParams(shape, true);
    params.sinks = variant.sinks;
    params.window.left = variant.window_left;
    ScoreValues values;
    if (variant.sinks) values.sinks = {2.0f, -1.0f, 3.5f, 0.5f, -kInf, 1.0f, 6.0f, -3.0f};  // one per query head
    const uint64_t rows = uint64_t(shape.batch) * shape.q_heads * shape.q_len;
    std::vector<float> one_part;
    for (uint32_t splits : {1u, 7u, 0u}) {  // 0: from the device
      INFO(Describe(params) << ", rows per KV head " << shape.q_heads / shape.kv_heads * shape.q_len << ", decode_splits "
                            << splits);
      ContextOptions options = ValidatedOptions();
      options.tile_overrides.decode_splits = splits;
      auto context = Context::Create(options);
      REQUIRE(context.ok());
      RequireDecodeWhereUsed(**context, params);
      auto workspace = (*context)->ForwardWorkspaceBytes(params);
      REQUIRE(workspace.ok());
      auto choice = (*context)->ChooseForwardKernel(params);
      REQUIRE(choice.ok());
      if (choice->family == "decode") {
        // Parts keep each row's O and LSE per part: O(rows x D x parts), never O(kv_len). 7 parts
        // asked for are 7 or fewer: each part's keys are rounded up to whole BLOCK_KV steps.
        const uint64_t alignment = std::max<uint64_t>((*context)->device_info().min_storage_buffer_offset_alignment, 16);
        const uint64_t step = choice->block_kv, part_keys = ((shape.kv_len + 6) / 7 + step - 1) / step * step;
        const uint64_t parts = (shape.kv_len + part_keys - 1) / part_keys;
        const uint64_t part_bytes = rows * parts * (shape.head_dim + 1) * 4;
        if (splits == 1) CHECK(*workspace == 0);
        if (splits == 7) CHECK((*workspace >= part_bytes && *workspace < part_bytes + alignment));
      }
      CheckSplitRun(**context, params, 77, values, splits, &one_part);
      RequireNoValidationMessages();
    }
  }
}

TEST_CASE("decode: a key a row cannot see has no effect, across split-K parts", "[decode][nonfinite]") {
  ContextOptions options = ValidatedOptions();
  options.tile_overrides.decode_splits = 3;  // the merge pass carries -inf, NaN and masked keys
  auto context = Context::Create(options);
  REQUIRE(context.ok());
  // 2 or 4 heads per KV head x 4 rows (the register and the tensor-core kernel); row i sees keys
  // j <= i + 596: the last key only row 3 sees. The register kernel at D = 16 holds two keys per
  // lane, at D = 64 one, at D = 256 one per 4 lanes (its reduce-scatter's layouts).
  for (const AttentionShape& shape : {AttentionShape{1, 4, 2, 4, 600, 64}, AttentionShape{1, 8, 2, 4, 600, 64},
                                      AttentionShape{1, 4, 2, 4, 600, 16}, AttentionShape{1, 4, 2, 4, 600, 256}}) {
    const AttentionParams params = DecodeParams(shape, true);
    RequireDecodeWhereUsed(**context, params);
    const AttentionShape& s = params.shape;
    const uint32_t D = s.head_dim, key = s.kv_len - 1;
    const ForwardRun base = RunForwardCase(**context, params, 5);
    const float inf = std::numeric_limits<float>::infinity();
    for (float poison : {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
      for (bool in_v : {true, false}) {
        INFO("key " << key << (in_v ? " of V" : " of K") << " = " << poison);
        std::vector<float> k = base.k, v = base.v;
        for (uint32_t kvh = 0; kvh < s.batch * s.kv_heads; ++kvh) {
          for (uint32_t d = 0; d < D; ++d) (in_v ? v : k)[(uint64_t(kvh) * s.kv_len + key) * D + d] = poison;
        }
        const ForwardRun run = RunForwardWith(**context, params, base.q, k, v);
        for (uint32_t bh = 0; bh < s.batch * s.q_heads; ++bh) {
          for (uint32_t i = 0; i < s.q_len; ++i) {
            const uint64_t row = uint64_t(bh) * s.q_len + i;
            if (i < 3) {  // exactly as without the poison
              REQUIRE(std::memcmp(&run.o[row * D], &base.o[row * D], D * sizeof(float)) == 0);
              REQUIRE(std::memcmp(&run.lse[row], &base.lse[row], sizeof(float)) == 0);
            } else if (in_v) {  // the row sees V's inf or NaN; its LSE does not
              for (uint32_t d = 0; d < D; ++d) REQUIRE_FALSE(std::isfinite(run.o[row * D + d]));
              REQUIRE(std::memcmp(&run.lse[row], &base.lse[row], sizeof(float)) == 0);
            } else {  // a NaN score (inf times K's mixed signs sums to NaN): the row is NaN
              REQUIRE(std::isnan(run.lse[row]));
              for (uint32_t d = 0; d < D; ++d) REQUIRE(std::isnan(run.o[row * D + d]));
            }
          }
        }
      }
    }
  }
  RequireNoValidationMessages();
}

TEST_CASE("the read probe reads every word of its sources once", "[diagnostics]") {
  Context& context = SharedContext(Knobs::kDevice);
  // Sources of different lengths: one long enough for the probe's four-word loop (words >= 4 x its
  // invocations: 128 workgroups of 256 where the device does not report its compute units), others
  // only for its one-word tail.
  const std::vector<uint32_t> lengths = {4 * (4 * 128 * 256 * 2 + 3), 4 * 1000 + 12, 4 * 77};  // uints
  std::vector<Buffer> sources;
  std::vector<BufferView> views;
  std::array<uint32_t, 4> expected{};  // the XOR of every source's 16-byte words
  uint32_t x = 12345;
  for (uint32_t length : lengths) {
    std::vector<uint32_t> data(length);
    for (uint32_t i = 0; i < length; ++i) {
      x = x * 1664525u + 1013904223u;
      data[i] = x;
      expected[i % 4] ^= x;
    }
    auto buffer = context.CreateBuffer(length * 4);
    REQUIRE(buffer.ok());
    REQUIRE(context.Upload(buffer->view(), data.data(), length * 4).ok());
    views.push_back(buffer->view());
    sources.push_back(std::move(buffer).value());
  }
  const uint64_t sink_bytes = ReadStreamSinkBytes(context, views);
  REQUIRE(sink_bytes >= 16 * lengths.size());
  auto sink = context.CreateBuffer(sink_bytes);
  REQUIRE(sink.ok());
  std::vector<uint32_t> words(sink_bytes / 4, 0);
  REQUIRE(context.Upload(sink->view(), words.data(), sink_bytes).ok());
  auto run = MeasureGpuTime(context, [&](VkCommandBuffer cmd) { return RecordReadStream(context, cmd, views, sink->view()); }, 1);
  REQUIRE(run.ok());
  REQUIRE(context.Download(sink->view(), words.data(), sink_bytes).ok());
  std::array<uint32_t, 4> got{};
  for (size_t i = 0; i < words.size(); ++i) got[i % 4] ^= words[i];
  CHECK(got == expected);
  // Sources that are not whole 16-byte words, and a sink too small, are refused.
  const BufferView ragged{views[0].buffer, views[0].offset, 20};
  const BufferView small_sink{sink->view().buffer, 0, 16};
  for (auto [source, into] : {std::pair{ragged, sink->view()}, std::pair{views[1], small_sink}}) {
    if (into.size == 16 && ReadStreamSinkBytes(context, std::span<const BufferView>(&source, 1)) <= 16) continue;
    CHECK(MeasureGpuTime(context, [&](VkCommandBuffer cmd) {
            return RecordReadStream(context, cmd, std::span<const BufferView>(&source, 1), into);
          }, 1).status().code() == ErrorCode::kInvalidArgument);
  }
  RequireNoValidationMessages();
}

TEST_CASE("decode: recorded without a workspace, a split call runs as one part", "[decode]") {
  ContextOptions options = ValidatedOptions();
  options.tile_overrides.decode_splits = 5;
  auto context = Context::Create(options);
  REQUIRE(context.ok());
  Context& ctx = **context;
  const AttentionParams params = DecodeParams({1, 4, 1, 1, 2000, 64}, false);
  const AttentionShape& s = params.shape;
  if (!ctx.device_info().use_decode_kernels) return;
  auto workspace_bytes = ctx.ForwardWorkspaceBytes(params);
  REQUIRE((workspace_bytes.ok() && *workspace_bytes > 0));  // five parts want one
  const ForwardRun reference = RunForwardCase(ctx, params, 9);  // with a workspace
  std::vector<Buffer> held;
  auto tensor = [&](const std::vector<float>& values) {
    std::vector<uint16_t> halves(values.size());
    for (size_t i = 0; i < values.size(); ++i) halves[i] = tools::FloatToHalf(values[i]);
    auto buffer = ctx.CreateBuffer(halves.size() * 2);
    REQUIRE(buffer.ok());
    REQUIRE(ctx.Upload(buffer->view(), halves.data(), halves.size() * 2).ok());
    held.push_back(std::move(buffer).value());
    return held.back().view();
  };
  ForwardBuffers buffers{tensor(reference.q), tensor(reference.k), tensor(reference.v),
                         tensor(std::vector<float>(s.q_elements(), 0.0f))};
  auto run = MeasureGpuTime(ctx, [&](VkCommandBuffer cmd) { return ctx.RecordForward(cmd, params, buffers); }, 1);
  REQUIRE(run.ok());
  std::vector<uint16_t> halves(s.q_elements());
  REQUIRE(ctx.Download(buffers.o, halves.data(), halves.size() * 2).ok());
  std::vector<float> o(halves.size());
  for (size_t i = 0; i < o.size(); ++i) o[i] = tools::HalfToFloat(halves[i]);
  CHECK(tools::RelativeError(o, std::vector<double>(reference.o.begin(), reference.o.end())) <= 1e-3);
  RequireNoValidationMessages();
}

TEST_CASE("decode: a merge of more parts than its invocations read in one round", "[decode]") {
  // The merge pass (attention_decode_combine.comp) gives each column quad 128 / (D / 4) invocations
  // (4 at D = 128, 8 at D = 64), each reading 8 of its parts at once: 47 parts of 64 keys at D = 128
  // and 71 of 128 at D = 64 take two rounds, the second one short. Against the reference, one part,
  // and the same bits again.
  struct Case {
    AttentionShape shape;
    uint32_t parts;
  };
  uint32_t seed = 3100;
  for (const Case& c : {Case{{1, 4, 1, 1, 3000, 128}, 47}, Case{{1, 4, 1, 1, 9000, 64}, 71}}) {
    const AttentionParams params = DecodeParams(c.shape, false);
    INFO(Describe(params) << ", parts " << c.parts);
    std::vector<float> one_part;
    for (uint32_t splits : {1u, c.parts}) {
      ContextOptions options = ValidatedOptions();
      options.tile_overrides.decode_splits = splits;
      auto context = Context::Create(options);
      REQUIRE(context.ok());
      RequireDecodeWhereUsed(**context, params);
      auto choice = (*context)->ChooseForwardKernel(params);
      REQUIRE(choice.ok());
      auto workspace = (*context)->ForwardWorkspaceBytes(params);
      REQUIRE(workspace.ok());
      if (choice->family == "decode" && splits > 1) {
        // Every part asked for runs: one BLOCK_KV step each, O and LSE kept per part.
        REQUIRE(c.parts == (c.shape.kv_len + choice->block_kv - 1) / choice->block_kv);
        CHECK(*workspace >= uint64_t(c.shape.q_heads) * c.parts * (c.shape.head_dim + 1) * 4);
      }
      CheckSplitRun(**context, params, seed, {}, splits, &one_part);
      RequireNoValidationMessages();
    }
    ++seed;
  }
}

TEST_CASE("decode: where the decode kernel's step does not fit a loop budget, the scalar kernels run the call",
          "[forward][decode][knobs]") {
  // A budget of 4000 iterations: the register decode kernel's merge of its 64 groups' rows (4 packed
  // rows of D = 80) comes on top of every part, more than half of it, so the choice must leave the
  // call to a family whose loops split. Where the decode kernels are not used there is no choice to
  // check, only the call.
  Context& context = SharedContext(Knobs::kSmallLoopBudget);
  const bool decode_used = context.device_info().use_decode_kernels;
  const AttentionParams params = DecodeParams({2, 1, 1, 4, 1949, 80}, true);
  INFO(Describe(params));
  auto choice = context.ChooseForwardKernel(params);
  REQUIRE(choice.ok());
  if (decode_used) CHECK(choice->family != "decode");
  CheckForwardAgainstReference(context, params, 3200);
  // D = 64 at one packed row still fits: the decode kernel runs it, in parts within the budget.
  const AttentionParams fits = DecodeParams({1, 1, 1, 1, 3000, 64}, false);
  auto decode = context.ChooseForwardKernel(fits);
  REQUIRE(decode.ok());
  if (decode_used) CHECK(decode->family == "decode");
  CheckForwardAgainstReference(context, fits, 3201);
}
