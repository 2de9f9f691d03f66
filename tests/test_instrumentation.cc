// The instrumented forward (for the tile viewer): its per-tile statistics follow the online
// softmax replayed on the CPU, and instrumenting changes no output bit.
#include <catch2/catch.hpp>
#include <vkflash/diagnostics.hpp>

#include <cmath>
#include <limits>

#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

Buffer Upload(Context& context, const std::vector<float>& values, size_t bytes) {
  auto buffer = context.CreateBuffer(bytes);
  REQUIRE(buffer.ok());
  if (!values.empty()) REQUIRE(context.Upload(buffer->view(), values.data(), bytes).ok());
  return std::move(buffer).value();
}

}  // namespace

TEST_CASE("instrumented forward: tile statistics match the online softmax, outputs unchanged", "[forward][instrument][knobs]") {
  for (Knobs knobs : {Knobs::kDevice, Knobs::kMobile}) {
    Context& context = SharedContext(knobs);
    // The plain forward of the kernel the instrumented one is: the per-row scalar kernel.
    ContextOptions per_row_options = ValidatedOptions();
    per_row_options.max_shared_bytes = context.device_info().usable_shared_memory_bytes;
    per_row_options.disable_subgroup_ops = !context.device_info().use_subgroup_ops;
    per_row_options.tile_overrides.scalar_forward = "per-row";
    auto per_row = Context::Create(per_row_options);
    REQUIRE(per_row.ok());
    AttentionParams params;
    params.shape = {1, 2, 1, 20, 45, 16};
    params.causal = true;
    params.scale = 0.7f;
    const auto& s = params.shape;
    auto choice = ChooseInstrumentedForwardKernel(context, params);
    REQUIRE(choice.ok());
    const uint32_t br = choice->block_q, bc = choice->block_kv;
    const uint32_t tiles = (s.kv_len + bc - 1) / bc;
    INFO(KnobsName(knobs) << ": Br=" << br << " Bc=" << bc);

    const auto q = RandomValues(s.q_elements(), DataType::kFloat32, 1);
    const auto k = RandomValues(s.kv_elements(), DataType::kFloat32, 2);
    const auto v = RandomValues(s.kv_elements(), DataType::kFloat32, 3);
    Buffer qb = Upload(context, q, q.size() * 4), kb = Upload(context, k, k.size() * 4), vb = Upload(context, v, v.size() * 4);
    Buffer o_instr = Upload(context, {}, q.size() * 4);
    Buffer lse = Upload(context, {}, s.lse_elements() * 4);
    const size_t stats_floats = ForwardStatsBytes(s, *choice) / 4;
    REQUIRE(stats_floats == s.lse_elements() * tiles * 5);
    Buffer stats = Upload(context, std::vector<float>(stats_floats, NAN), stats_floats * 4);

    std::vector<float> plain(q.size()), instrumented(q.size()), got(stats_floats);
    {
      Buffer pq = Upload(**per_row, q, q.size() * 4), pk = Upload(**per_row, k, k.size() * 4);
      Buffer pv = Upload(**per_row, v, v.size() * 4), po = Upload(**per_row, {}, q.size() * 4);
      REQUIRE((*per_row)->Forward(params, {pq.view(), pk.view(), pv.view(), po.view(), {}}).ok());
      REQUIRE((*per_row)->Download(po.view(), plain.data(), plain.size() * 4).ok());
    }
    REQUIRE(InstrumentedForward(context, params, {qb.view(), kb.view(), vb.view(), o_instr.view(), lse.view()},
                                stats.view()).ok());
    REQUIRE(context.Download(o_instr.view(), instrumented.data(), instrumented.size() * 4).ok());
    REQUIRE(context.Download(stats.view(), got.data(), got.size() * 4).ok());
    CHECK(plain == instrumented);

    // Replay the online softmax per row over the tiles its Q tile visits.
    const double inf = std::numeric_limits<double>::infinity();
    const int shift = int(s.kv_len) - int(s.q_len);
    for (uint32_t h = 0; h < s.q_heads; ++h) {
      for (uint32_t i = 0; i < s.q_len; ++i) {
        const uint32_t q_tile_end = std::min((i / br + 1) * br, s.q_len);
        const uint32_t kv_end = uint32_t(std::clamp(int(q_tile_end) - 1 + shift + 1, 0, int(s.kv_len)));
        double m = -inf, l = 0.0;
        for (uint32_t t = 0; t * bc < kv_end; ++t) {
          double tile_max = -inf;
          std::vector<double> scores;
          for (uint32_t j = t * bc; j < std::min((t + 1) * bc, s.kv_len); ++j) {
            if (int(j) > int(i) + shift) continue;  // masked for this row
            double dot = 0.0;
            for (uint32_t d = 0; d < s.head_dim; ++d) dot += double(q[(h * s.q_len + i) * s.head_dim + d]) * k[j * s.head_dim + d];
            scores.push_back(dot * 0.7);
            tile_max = std::max(tile_max, scores.back());
          }
          const double m_new = std::max(m, tile_max);
          const double ref = std::isinf(m_new) ? 0.0 : m_new;
          const double alpha = std::exp(m - ref);
          double tile_sum = 0.0;
          for (double sc : scores) tile_sum += std::exp(sc - ref);
          l = l * alpha + tile_sum;
          m = m_new;
          const float* row = &got[(((h) * s.q_len + i) * tiles + t) * 5];
          INFO("head " << h << " row " << i << " tile " << t);
          if (std::isinf(m)) {
            CHECK(std::isinf(row[0]));
          } else {
            CHECK(row[0] == Approx(m).margin(1e-4));
          }
          CHECK(row[1] == Approx(l).epsilon(1e-4));
          CHECK(row[2] == Approx(alpha).margin(1e-5));
          if (std::isinf(tile_max)) {
            CHECK(std::isinf(row[3]));
          } else {
            CHECK(row[3] == Approx(tile_max).margin(1e-4));
          }
          CHECK(row[4] == Approx(tile_sum).epsilon(1e-4).margin(1e-6));
        }
      }
    }
    RequireNoValidationMessages();
  }
}

TEST_CASE("instrumented forward: a missing stats buffer is an error, not a plain forward", "[forward][instrument]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams params;
  params.shape = {1, 1, 1, 8, 8, 16};
  const auto& s = params.shape;
  Buffer qb = Upload(context, {}, s.q_elements() * 4), kb = Upload(context, {}, s.kv_elements() * 4);
  Buffer vb = Upload(context, {}, s.kv_elements() * 4), ob = Upload(context, {}, s.q_elements() * 4);
  const ForwardBuffers buffers{qb.view(), kb.view(), vb.view(), ob.view()};
  CHECK(InstrumentedForward(context, params, buffers, {}).code() == ErrorCode::kInvalidArgument);
  const Status recorded = MeasureGpuTime(context, [&](VkCommandBuffer cmd) {
    return RecordInstrumentedForward(context, cmd, params, buffers, {});
  }, 1).status();
  CHECK(recorded.code() == ErrorCode::kInvalidArgument);
  RequireNoValidationMessages();
}
