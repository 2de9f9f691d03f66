// The VKFLASH_* environment variables are read once, into the resolved ContextOptions: a field the
// caller set wins, an unset one takes the variable's value.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <optional>
#include <string>

#include "context_options.h"

using namespace vkflash;

namespace {

// Sets (or, with nullptr, unsets) an environment variable for the scope, then restores it: the
// suite may itself run with VKFLASH_KERNELS and others set.
struct ScopedVariable {
  const char* name;
  std::optional<std::string> previous;
  ScopedVariable(const char* n, const char* value) : name(n) {
    if (const char* old = getenv(name)) previous = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedVariable() {
    if (previous) {
      setenv(name, previous->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
};

}  // namespace

TEST_CASE("ContextOptions: the environment fills what the caller left unset", "[options]") {
  ScopedVariable kernels("VKFLASH_KERNELS", "scalar"), shared("VKFLASH_MAX_SHARED_BYTES", "16384"),
      loops("VKFLASH_MAX_LOOP_ITERATIONS", "4000"), subgroup("VKFLASH_DISABLE_SUBGROUP_OPS", "1"),
      push("VKFLASH_DISABLE_PUSH_DESCRIPTORS", nullptr), statistics("VKFLASH_PIPELINE_STATISTICS", "yes"),
      device("VKFLASH_DEVICE", "llvmpipe"), tile("VKFLASH_COOPMAT2_DQ_TILE", "64x32x128"),
      forward_tile("VKFLASH_COOPMAT2_FORWARD_TILE", nullptr);

  auto resolved = ResolveContextOptions(ContextOptions{});
  REQUIRE(resolved.ok());
  CHECK(resolved->kernels == "scalar");
  CHECK(resolved->max_shared_bytes == 16384);
  CHECK(resolved->max_loop_iterations == 4000);
  CHECK(resolved->disable_subgroup_ops);
  CHECK_FALSE(resolved->disable_push_descriptors);
  CHECK(resolved->pipeline_statistics);
  CHECK(resolved->device_selector == "llvmpipe");
  CHECK(resolved->tile_overrides.coopmat2_dq == "64x32x128");
  CHECK(resolved->tile_overrides.coopmat2_forward.empty());

  ContextOptions set;
  set.kernels = "auto";
  set.max_shared_bytes = 32768;
  set.device_selector = "0";
  set.tile_overrides.coopmat2_dq = "32x32x64";
  resolved = ResolveContextOptions(set);
  REQUIRE(resolved.ok());
  CHECK(resolved->kernels == "auto");
  CHECK(resolved->max_shared_bytes == 32768);
  CHECK(resolved->device_selector == "0");
  CHECK(resolved->tile_overrides.coopmat2_dq == "32x32x64");
}

TEST_CASE("ContextOptions: defaults without the environment, malformed numbers refused", "[options]") {
  ScopedVariable kernels("VKFLASH_KERNELS", nullptr), shared("VKFLASH_MAX_SHARED_BYTES", nullptr),
      loops("VKFLASH_MAX_LOOP_ITERATIONS", nullptr);
  auto resolved = ResolveContextOptions(ContextOptions{});
  REQUIRE(resolved.ok());
  CHECK(resolved->kernels == "auto");
  CHECK(resolved->max_shared_bytes == 0);
  CHECK(resolved->max_loop_iterations == 0);
  {
    ScopedVariable bad_shared("VKFLASH_MAX_SHARED_BYTES", "lots");
    CHECK(ResolveContextOptions(ContextOptions{}).status().code() == ErrorCode::kInvalidArgument);
    ContextOptions set;
    set.max_shared_bytes = 16384;  // a set field is not overridden, so the variable is not read
    CHECK(ResolveContextOptions(set).ok());
  }
  ScopedVariable bad_loops("VKFLASH_MAX_LOOP_ITERATIONS", "-3");
  CHECK(ResolveContextOptions(ContextOptions{}).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("ContextOptions: how deterministic = false sums dQ, from the caller or the environment", "[options]") {
  ScopedVariable method("VKFLASH_NONDETERMINISTIC_DQ", "stored-ds"), budget("VKFLASH_STORED_DS_MAX_MIB", "256");
  auto resolved = ResolveContextOptions(ContextOptions{});
  REQUIRE(resolved.ok());
  CHECK(resolved->tile_overrides.nondeterministic_dq == "stored-ds");
  CHECK(resolved->tile_overrides.stored_ds_max_mib == 256);
  for (const char* value : {"atomic", "recompute"}) {
    ContextOptions set;
    set.tile_overrides.nondeterministic_dq = value;
    resolved = ResolveContextOptions(set);
    REQUIRE(resolved.ok());
    CHECK(resolved->tile_overrides.nondeterministic_dq == value);
  }
  ContextOptions bad;
  bad.tile_overrides.nondeterministic_dq = "stored_ds";  // a near miss is refused, not ignored
  auto refused = ResolveContextOptions(bad);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == ErrorCode::kInvalidArgument);
  CHECK(refused.status().message().find("stored_ds") != std::string::npos);
  ScopedVariable bad_budget("VKFLASH_STORED_DS_MAX_MIB", "lots");
  CHECK(ResolveContextOptions(ContextOptions{}).status().code() == ErrorCode::kInvalidArgument);
}
