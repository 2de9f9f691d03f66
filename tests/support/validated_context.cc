#include "validated_context.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "attention/backends/scalar_backend.h"

namespace vkflash::testing {
namespace {

std::mutex g_mutex;
std::vector<std::string> g_messages;        // since the last RequireNoValidationMessages
std::vector<std::string> g_all_messages;    // since the start
std::map<Knobs, std::unique_ptr<Context>> g_contexts;

}  // namespace

const char* KnobsName(Knobs knobs) {
  switch (knobs) {
    case Knobs::kDevice: return "device limits";
    case Knobs::kMobile: return "16 KB shared, no subgroup ops";
    case Knobs::kNoPushDescriptors: return "no push descriptors";
    case Knobs::kSmallLoopBudget: return "a loop budget of 4000 iterations";
  }
  return "?";
}

ContextOptions ValidatedOptions() {
  ContextOptions options;
  options.enable_validation = true;
  options.message_callback = RecordValidationMessage;
  return options;
}

void RecordValidationMessage(MessageSeverity severity, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::string line = std::string(severity == MessageSeverity::kError ? "error: " : "warning: ") + message;
  g_messages.push_back(line);
  g_all_messages.push_back(line);
}

Context& SharedContext(Knobs knobs) {
  auto& slot = g_contexts[knobs];
  if (!slot) {
    ContextOptions options = ValidatedOptions();
    options.max_shared_bytes = knobs == Knobs::kMobile ? 16384 : 0;
    options.disable_subgroup_ops = knobs == Knobs::kMobile;
    options.disable_push_descriptors = knobs == Knobs::kNoPushDescriptors;
    options.max_loop_iterations = knobs == Knobs::kSmallLoopBudget ? 4000 : 0;
    auto context = Context::Create(options);
    INFO(context.status().ToString());
    REQUIRE(context.ok());
    slot = std::move(context).value();
  }
  return *slot;
}

std::string KernelsDescription(Context& context, const AttentionParams& params) {
  auto forward = context.ChooseForwardKernel(params);
  auto backward = context.ChooseBackwardKernels(params);
  REQUIRE((forward.ok() && backward.ok()));
  const auto name = [](const KernelChoice& c) {
    return c.kernel + " " + std::to_string(c.block_q) + "x" + std::to_string(c.block_kv) + "/" +
           std::to_string(c.threads_per_row) + " (" + std::to_string(c.workgroup_size) + ")";
  };
  return name(*forward) + ", " + name(backward->dkdv) + ", " + name(backward->dq);
}

namespace {

// OxSxTxR of a register-tiled scalar kernel (ContextOptions::tile_overrides): owned rows, streamed
// rows, invocations per row group, rows per invocation.
std::string TiledOverride(uint32_t owned, uint32_t streamed, const KernelChoice& c) {
  return std::to_string(owned) + "x" + std::to_string(streamed) + "x" + std::to_string(c.threads_per_row) + "x" +
         std::to_string(owned * c.threads_per_row / c.workgroup_size);
}

// Tile overrides under which a context runs the scalar kernels and tiles `context` picks for
// `params`. Not every choice can be forced (SameTilesContext compares the choices and fails where
// they differ): a per-row gradient kernel beside a register-tiled one, shared-memory against
// subgroup reductions, and K staged as floats (the _kf32 forwards) follow from the tile and the
// context's limits.
TileOverrides SameScalarTiles(Context& context, const AttentionParams& params) {
  auto forward = context.ChooseForwardKernel(params);
  auto backward = context.ChooseBackwardKernels(params);
  REQUIRE((forward.ok() && backward.ok()));
  const KernelChoice &f = *forward, &dkdv = backward->dkdv, &dq = backward->dq;
  REQUIRE((f.family == "scalar" && dkdv.family == "scalar" && dq.family == "scalar"));
  TileOverrides overrides;
  overrides.scalar_forward = attention::IsTiledForward(f)
                                 ? TiledOverride(f.block_q, f.block_kv, f)
                                 : std::to_string(f.block_q) + "x" + std::to_string(f.block_kv) + "x" +
                                       std::to_string(f.threads_per_row);  // QxKxT of the per-row kernel
  const bool tiled_dkdv = attention::IsTiledBackward(dkdv), tiled_dq = attention::IsTiledBackward(dq);
  if (tiled_dkdv || tiled_dq) {
    const std::string dkdv_tile = tiled_dkdv ? TiledOverride(dkdv.block_kv, dkdv.block_q, dkdv) : "";
    const std::string dq_tile = tiled_dq ? TiledOverride(dq.block_q, dq.block_kv, dq) : "";
    overrides.scalar_backward = dkdv_tile + "," + dq_tile;
  } else {
    overrides.scalar_backward = "per-row";
  }
  return overrides;
}

}  // namespace

std::unique_ptr<Context> SameTilesContext(Context& chunked, const AttentionParams& params) {
  ContextOptions options = ValidatedOptions();
  options.tile_overrides = SameScalarTiles(chunked, params);
  auto created = Context::Create(options);
  INFO(created.status().ToString());
  REQUIRE(created.ok());
  std::unique_ptr<Context> whole = std::move(created).value();
  const std::string chunked_kernels = KernelsDescription(chunked, params);
  const std::string whole_kernels = KernelsDescription(*whole, params);
  INFO("chunked: " << chunked_kernels << "; same tiles: " << whole_kernels);
  REQUIRE(chunked_kernels == whole_kernels);
  return whole;
}

void ReleaseSharedContexts() { g_contexts.clear(); }

const std::vector<std::string>& ValidationMessages() { return g_all_messages; }

void RequireNoValidationMessages() {
  std::vector<std::string> messages;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    messages.swap(g_messages);
  }
  for (const auto& m : messages) UNSCOPED_INFO(m);
  REQUIRE(messages.empty());
}

}  // namespace vkflash::testing
