// Loops longer than the driver lets one invocation run. Mesa 22.3's lavapipe (CI's device) ends
// every loop of an invocation after 65535 iterations in all; before vkflash split its loops into
// chunks, the forward returned wrong O and LSE past ~3,250 keys at D=256, ~6,880 at D=128,
// ~13,090 at D=64 and ~23,550 at D=32, and the backward's dK/dV went inf past ~13,790 query rows
// at D=64. Each case here is past such a threshold; on devices without a budget they run unsplit.
#include <catch2/catch.hpp>

#include <random>
#include <utility>

#include "attention/backends/scalar_backend.h"
#include "attention/chunk_plan.h"
#include "attention/kernel_choice.h"
#include "util/ceil_div.h"
#include "support/attention_case.h"
#include "support/mask_values.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

void CheckForward(Context& context, const AttentionParams& params) {
  INFO(Describe(params) << ", loop budget " << context.device_info().shader_loop_budget);
  auto workspace = context.ForwardWorkspaceBytes(params);
  REQUIRE(workspace.ok());
  // Where the driver has a budget these loops are too long for one dispatch: chunks, state.
  if (context.device_info().shader_loop_budget > 0) CHECK(*workspace > 0);
  const ForwardRun run = RunForwardCase(context, params, 7);
  CHECK(run.o_error <= ForwardTolerance(params.dtype));
  CHECK(run.lse_error <= ForwardTolerance(params.dtype));
  RequireNoValidationMessages();
}

void CheckBackward(Context& context, const AttentionParams& params) {
  INFO(Describe(params) << ", loop budget " << context.device_info().shader_loop_budget);
  auto workspace = context.BackwardWorkspaceBytes(params);
  REQUIRE(workspace.ok());
  if (context.device_info().shader_loop_budget > 0) CHECK(*workspace > params.shape.lse_elements() * sizeof(float));
  const BackwardRun run = RunBackwardCase(context, params, 8);
  CHECK(run.dq_error <= BackwardTolerance(params.dtype));
  CHECK(run.dk_error <= BackwardTolerance(params.dtype));
  CHECK(run.dv_error <= BackwardTolerance(params.dtype));
  CHECK(run.peak_extra_bytes == *workspace);  // still O(N): the workspace and nothing else
  RequireNoValidationMessages();
}

}  // namespace

TEST_CASE("forward is right past the driver's loop budget, at every head dim", "[forward][long]") {
  Context& context = SharedContext(Knobs::kDevice);
  CheckForward(context, MakeParams({1, 2, 1, 16, 4000, 256}, DataType::kFloat32, false));
  CheckForward(context, MakeParams({1, 2, 1, 16, 8000, 128}, DataType::kFloat32, false));
  CheckForward(context, MakeParams({1, 2, 1, 16, 14000, 64}, DataType::kFloat32, false));
  CheckForward(context, MakeParams({1, 2, 1, 16, 25000, 32}, DataType::kFloat32, false));
  CheckForward(context, MakeParams({1, 1, 1, 40, 20000, 64}, DataType::kFloat16, true));
  CheckForward(context, MakeParams({1, 1, 1, 300, 14000, 80}, DataType::kFloat16, false));
}

TEST_CASE("backward is right past the driver's loop budget, on both gradient kernels", "[backward][long]") {
  Context& context = SharedContext(Knobs::kDevice);
  CheckBackward(context, MakeParams({1, 2, 1, 14000, 40, 64}, DataType::kFloat32, false));  // dK/dV: many queries
  CheckBackward(context, MakeParams({1, 1, 1, 9000, 33, 128}, DataType::kFloat16, true));
  CheckBackward(context, MakeParams({1, 1, 1, 24, 16000, 64}, DataType::kFloat32, true));   // dQ: many keys
  CheckBackward(context, MakeParams({1, 1, 1, 20, 5000, 256}, DataType::kFloat32, false));
}

TEST_CASE("the per-row gradient kernels are right past the driver's loop budget", "[backward][long]") {
  // They run views the register-tiled kernels cannot load and odd head dims; forced here.
  ContextOptions options = ValidatedOptions();
  options.tile_overrides.scalar_backward = "per-row";
  auto created = Context::Create(options);
  REQUIRE(created.ok());
  Context& context = **created;
  const AttentionParams params = MakeParams({1, 2, 1, 14000, 40, 64}, DataType::kFloat32, true);
  auto choice = context.ChooseBackwardKernels(params);
  REQUIRE(choice.ok());
  CHECK(choice->dkdv.kernel == "backward_dkdv_f32");
  CHECK(choice->dq.kernel == "backward_dq_f32");
  CheckBackward(context, params);
  CheckBackward(context, MakeParams({1, 1, 1, 24, 9000, 64}, DataType::kFloat32, false));
}

TEST_CASE("long loops on mobile-sized limits (small tiles, shared-memory reductions)", "[long][knobs]") {
  Context& context = SharedContext(Knobs::kMobile);
  CheckForward(context, MakeParams({1, 2, 1, 9, 9000, 128}, DataType::kFloat32, true));
  CheckBackward(context, MakeParams({1, 2, 1, 6000, 21, 96}, DataType::kFloat16, false));
}

TEST_CASE("a chunked forward recorded without its workspace is refused, not run short", "[forward][long][errors]") {
  Context& context = SharedContext(Knobs::kDevice);
  const AttentionParams params = MakeParams({1, 1, 1, 16, 14000, 64}, DataType::kFloat32, false);
  auto workspace = context.ForwardWorkspaceBytes(params);
  REQUIRE(workspace.ok());
  if (*workspace == 0) return;  // no loop budget on this device: nothing to refuse
  auto make = [&](uint64_t bytes) {
    auto b = context.CreateBuffer(bytes);
    REQUIRE(b.ok());
    return std::move(b).value();
  };
  Buffer q = make(params.shape.q_elements() * 4), kv = make(params.shape.kv_elements() * 4),
         o = make(params.shape.q_elements() * 4);
  const Status s = context.RecordForward(reinterpret_cast<VkCommandBuffer>(uintptr_t(1)), params,
                                         {q.view(), kv.view(), kv.view(), o.view()});
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("ForwardWorkspaceBytes") != std::string::npos);
  RequireNoValidationMessages();
}

TEST_CASE("chunk plans keep each dispatch within half the loop budget", "[long]") {
  DeviceInfo device;
  const attention::LoopCost cost{100, 50};
  auto plan = attention::PlanChunks(device, cost, 1000, 32);  // no budget: one chunk of everything
  REQUIRE(plan.ok());
  CHECK(plan->chunks == 1);
  CHECK(plan->length == 32000);
  device.shader_loop_budget = 65535;
  plan = attention::PlanChunks(device, cost, 600, 32);  // 100 + 600 * 50 fits in 32767
  REQUIRE(plan.ok());
  CHECK(plan->chunks == 1);
  plan = attention::PlanChunks(device, cost, 1000, 32);  // (32767 - 100) / 50 = 653 steps a chunk
  REQUIRE(plan.ok());
  CHECK(plan->chunks == 2);
  CHECK(plan->length == 653 * 32);
  CHECK(100 + 653 * 50 <= 65535 / 2);
  device.shader_loop_budget = 100;  // not even one step fits
  CHECK(attention::PlanChunks(device, cost, 10, 32).status().code() == ErrorCode::kUnsupported);
}

TEST_CASE("chunked passes give the same bits as one pass", "[long][knobs]") {
  // A context that chunks loops past 4000 iterations against one that runs its kernels and tiles
  // in one pass: the state between chunks is the online softmax's and the gradients' sums as they were.
  Context& chunked = SharedContext(Knobs::kSmallLoopBudget);
  REQUIRE(chunked.device_info().shader_loop_budget == 4000);
  for (const bool causal : {false, true}) {
    AttentionParams p = MakeParams({2, 4, 2, 300, 700, 64}, DataType::kFloat32, causal);  // scalar kernels on every device
    INFO(Describe(p));
    INFO("kernels: " << KernelsDescription(chunked, p));
    const std::unique_ptr<Context> same_tiles = SameTilesContext(chunked, p);
    Context& whole = *same_tiles;
    auto whole_workspace = whole.ForwardWorkspaceBytes(p);
    REQUIRE(whole_workspace.ok());
    REQUIRE(*whole_workspace == 0);  // one pass
    auto workspace = chunked.ForwardWorkspaceBytes(p);
    REQUIRE(workspace.ok());
    REQUIRE(*workspace > 0);  // chunked indeed
    const ForwardRun a = RunForwardCase(chunked, p, 31), b = RunForwardCase(whole, p, 31);
    CHECK(a.o == b.o);
    CHECK(a.lse == b.lse);
    CHECK(a.o_error <= ForwardTolerance(p.dtype));
    // The register-tiled gradient kernels, in chunks (their sums kept in the workspace).
    auto choice = chunked.ChooseBackwardKernels(p);
    REQUIRE(choice.ok());
    CHECK(choice->dkdv.kernel == "backward_dkdv_tiled_f32");
    CHECK(choice->dq.kernel == "backward_dq_tiled_f32");
    const KernelChoice &dkdv = choice->dkdv, &dq = choice->dq;
    // The chunks of each gradient kernel's loop on a context (2 heads per KV head in dK/dV's).
    const auto gradient_chunks = [&](Context& context) {
      const auto dkdv_plan = attention::PlanChunks(context.device_info(), attention::ScalarDkdvLoopCost(dkdv, 64),
                                                   CeilDiv(p.shape.q_len, dkdv.block_q) * 2, 1);
      const auto dq_plan = attention::PlanChunks(context.device_info(), attention::ScalarDqLoopCost(dq, 64),
                                                 CeilDiv(p.shape.kv_len, dq.block_kv), dq.block_kv);
      REQUIRE((dkdv_plan.ok() && dq_plan.ok()));
      return std::pair(dkdv_plan->chunks, dq_plan->chunks);
    };
    const auto [dkdv_chunks, dq_chunks] = gradient_chunks(chunked);
    CHECK(dkdv_chunks > 1);
    CHECK(dq_chunks > 1);
    // ... against both in one pass (the same kernels: SameTilesContext checked).
    CHECK(gradient_chunks(whole) == std::pair(1u, 1u));
    const BackwardRun c = RunBackwardCase(chunked, p, 32), d = RunBackwardCase(whole, p, 32);
    CHECK(c.dq == d.dq);
    CHECK(c.dk == d.dk);
    CHECK(c.dv == d.dv);
    CHECK(c.dk_error <= BackwardTolerance(p.dtype));
  }
  // Scores so large (~1e6) that a rounded LSE between chunks would lose the weights' digits (against
  // one pass, or on lavapipe fewer chunks).
  AttentionParams p = MakeParams({1, 1, 1, 8, 2000, 64}, DataType::kFloat32, false);
  auto q = RandomValues(p.shape.q_elements(), p.dtype, 33, 300.0f), k = RandomValues(p.shape.kv_elements(), p.dtype, 34, 40.0f);
  auto v = RandomValues(p.shape.kv_elements(), p.dtype, 35);
  const std::unique_ptr<Context> whole = SameTilesContext(chunked, p);
  auto forward = chunked.ChooseForwardKernel(p);
  REQUIRE(forward.ok());
  const auto forward_chunks = [&](Context& context) {
    auto plan = attention::PlanChunks(context.device_info(), attention::ScalarForwardLoopCost(*forward, 64, false),
                                      CeilDiv(p.shape.kv_len, forward->block_kv), forward->block_kv);
    REQUIRE(plan.ok());
    return plan->chunks;
  };
  CHECK(forward_chunks(chunked) > forward_chunks(*whole));
  const ForwardRun a = RunForwardWith(chunked, p, q, k, v), b = RunForwardWith(*whole, p, q, k, v);
  CHECK(a.o == b.o);
  CHECK(a.lse == b.lse);
  RequireNoValidationMessages();
}

namespace {

// `p` with a bias of `type` that has the rows and keys dimensions as asked (not batch or heads),
// and its values: one pair in ten blocked, the others Normal(0, 1.5).
std::pair<AttentionParams, ScoreValues> WithBias(AttentionParams p, MaskType type, bool rows, bool keys, std::mt19937& rng) {
  p.mask = {type, false, false, rows, keys};
  ScoreValues values;
  values.mask = BlockSparseMaskValues(p, rng, 0.0f, 0.1f, 1.5f);
  return {p, values};
}

}  // namespace

TEST_CASE("the bias's gradient is right past the driver's loop budget", "[backward][long][mask]") {
  // Each element of the gradient of a bias that broadcasts sums the pairs of every dimension it
  // lacks, in one loop, which a driver's budget (lavapipe's) must see run in chunks: a bias [1, 1, 1,
  // Nk] over 30000 query rows at D = 256 (3750 tile steps of 315 loop iterations), and a bias [1, 1,
  // 1, 1] with sinks over 2 x 4 heads x 267 x 319 pairs (5440 steps).
  std::mt19937 rng(36);
  Context& context = SharedContext(Knobs::kDevice);
  {
    const auto [p, values] = WithBias(MakeParams({1, 1, 1, 30000, 16, 256}, DataType::kFloat32, false),
                                      MaskType::kFloat32, false, true, rng);
    INFO(Describe(p) << ", loop budget " << context.device_info().shader_loop_budget);
    const BackwardRun run = RunBackwardCase(context, p, 37, values);
    CHECK(run.dbias_error <= BackwardTolerance(p.dtype));
    CHECK(run.dq_error <= BackwardTolerance(p.dtype));
  }
  {
    AttentionParams shape = MakeParams({2, 4, 2, 267, 319, 128}, DataType::kFloat16, false);
    shape.sinks = true;  // a bias without the keys dimension has the sinks' share of the gradient, else 0
    auto [p, values] = WithBias(shape, MaskType::kFloat32, false, false, rng);
    values.sinks = {0.5f, 1.0f, 1.5f, 2.0f};
    INFO(Describe(p) << ", loop budget " << context.device_info().shader_loop_budget);
    const BackwardRun run = RunBackwardCase(context, p, 38, values);
    CHECK(run.dbias_error <= BackwardTolerance(p.dtype));
  }
  RequireNoValidationMessages();
}

TEST_CASE("the bias's gradient in chunks gives one pass's bits", "[backward][long][mask][knobs]") {
  // A budget of 4000 splits the walk of a bias [1, 1, 1, Nk] over 2 x 4 heads x 12 row tiles into
  // chunks; the same kernel in one pass gives the same bits.
  std::mt19937 rng(39);
  Context& chunked = SharedContext(Knobs::kSmallLoopBudget);
  const auto [p, values] = WithBias(MakeParams({2, 4, 2, 90, 75, 64}, DataType::kFloat32, false), MaskType::kFloat16,
                                    false, true, rng);
  INFO(Describe(p));
  const std::unique_ptr<Context> whole = SameTilesContext(chunked, p);
  const KernelChoice dbias = attention::DbiasChoice(p);
  const uint64_t steps = 2 * 4 * CeilDiv(p.shape.q_len, dbias.block_q);
  const auto dbias_chunks = [&](Context& c) {
    auto plan = attention::PlanChunks(c.device_info(), attention::DbiasLoopCost(dbias, 64), steps, 1);
    REQUIRE(plan.ok());
    return plan->chunks;
  };
  CHECK(dbias_chunks(chunked) > 1);
  CHECK(dbias_chunks(*whole) == 1);
  // ...as the contexts plan it: the chunked one keeps a float per invocation of the dbias kernel (5
  // workgroups of 128 over the 75 keys) between chunks, a boolean mask (no gradient) nothing.
  const auto extra_workspace = [&](Context& c) {
    AttentionParams boolean = p;
    boolean.mask.type = MaskType::kBool;
    auto with = c.BackwardWorkspaceBytes(p), without = c.BackwardWorkspaceBytes(boolean);
    REQUIRE((with.ok() && without.ok()));
    return int64_t(*with) - int64_t(*without);
  };
  CHECK(extra_workspace(chunked) >= 5 * 128 * 4);
  CHECK(extra_workspace(*whole) == 0);
  const BackwardRun a = RunBackwardCase(chunked, p, 39, values), b = RunBackwardCase(*whole, p, 39, values);
  REQUIRE(a.dbias.size() == MaskElements(p));
  CHECK(a.dbias == b.dbias);
  CHECK(a.dbias_error <= BackwardTolerance(p.dtype));
  RequireNoValidationMessages();
}

TEST_CASE("a bias whose gradient the dbias kernel cannot walk still plans a backward that does not ask for it",
          "[backward][mask]") {
  // A bias [1, 1, 1, 1] over 64 heads x 2^17 x 2^17 pairs: each of its one element's invocations
  // would walk 64 x 2^14 x 2^13 = 2^33 tile steps, past the kernel's 32-bit walk. Only a call that
  // asks for dbias is refused (when recorded); the workspace of the others is planned as usual.
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams p = MakeParams({1, 64, 64, 1u << 17, 1u << 17, 64}, DataType::kFloat16, false);
  p.mask = {MaskType::kFloat32, false, false, false, false};
  INFO(Describe(p));
  auto workspace = context.BackwardWorkspaceBytes(p);
  INFO(workspace.status().ToString());
  CHECK(workspace.ok());
  RequireNoValidationMessages();
}
