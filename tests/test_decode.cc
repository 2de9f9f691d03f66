// The decode family (shaders/decode/): few query rows per KV head over many keys, packed per
// grouped-query group and split over workgroups, against the float64 reference. On a device
// without it (no subgroup operations) the same calls run another family and must still be right.
#include <catch2/catch.hpp>
#include <vkflash/device_info.hpp>

#include <cstring>
#include <vector>

#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

AttentionParams DecodeParams(AttentionShape shape, bool causal) {
  AttentionParams params;
  params.shape = shape;
  params.dtype = DataType::kFloat16;
  params.causal = causal;
  return params;
}

// Where the context has the decode kernels, this call runs them.
void RequireDecodeWhereUsed(Context& context, const AttentionParams& params) {
  if (!context.device_info().use_decode_kernels) return;
  auto choice = context.ChooseForwardKernel(params);
  REQUIRE(choice.ok());
  REQUIRE(choice->family == "decode");
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
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 2500;
  // (group, q_len): packed rows group * q_len up to 8; kv_len below q_len leaves rows that see no key.
  for (auto [group, q_len] : std::vector<std::pair<uint32_t, uint32_t>>{{1, 2}, {2, 3}, {4, 2}, {1, 8}, {2, 4}}) {
    for (uint32_t kv_len : {1u, 3u, 100u, 3000u}) {
      for (bool causal : {false, true}) {
        const AttentionParams params = DecodeParams({2, 2 * group, 2, q_len, kv_len, 128}, causal);
        RequireDecodeWhereUsed(context, params);
        CheckForwardAgainstReference(context, params, seed++);
      }
    }
  }
}

TEST_CASE("decode: split-K parts agree with one part, and give the same bits run after run", "[forward][decode]") {
  const AttentionParams params = DecodeParams({2, 8, 2, 2, 3000, 64}, true);  // one part fits lavapipe's loop budget
  for (uint32_t splits : {1u, 7u, 0u}) {  // 0: from the device
    INFO("decode_splits " << splits);
    ContextOptions options = ValidatedOptions();
    options.tile_overrides.decode_splits = splits;
    auto context = Context::Create(options);
    REQUIRE(context.ok());
    RequireDecodeWhereUsed(**context, params);
    auto workspace = (*context)->ForwardWorkspaceBytes(params);
    REQUIRE(workspace.ok());
    if ((*context)->device_info().use_decode_kernels) {
      // Parts keep each row's O and LSE per part: O(rows x D x parts), never O(kv_len).
      const uint64_t rows = 2 * 8 * 2;
      if (splits == 1) CHECK(*workspace == 0);
      if (splits == 7) CHECK(*workspace >= rows * 7 * (64 + 1) * 4);
      CHECK(*workspace <= rows * 4096 * (64 + 1) * 4 + 4096);
    }
    const ForwardRun first = RunForwardCase(**context, params, 77);
    CHECK(first.o_error <= ForwardTolerance(params.dtype));
    CHECK(first.lse_error <= ForwardTolerance(params.dtype));
    const ForwardRun again = RunForwardCase(**context, params, 77);
    REQUIRE(std::memcmp(first.o.data(), again.o.data(), first.o.size() * sizeof(float)) == 0);
    REQUIRE(std::memcmp(first.lse.data(), again.lse.data(), first.lse.size() * sizeof(float)) == 0);
    RequireNoValidationMessages();
  }
}
