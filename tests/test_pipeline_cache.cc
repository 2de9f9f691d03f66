// Pipelines are made once per (SPIR-V, constants); the cache file round-trips, and a file from
// another device or a damaged one is detected and ignored.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/attention_case.h"
#include "support/validated_context.h"
#include "util/hash.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

std::string TempPath(const std::string& name) {
  return "vkflash_test_" + name + ".bin";
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// The vkflash cache header (engine/vulkan/pipeline_cache_file.cc): magic[8], vendor, device,
// driver version, uuid[16], reserved, blob bytes (u64), blob FNV-1a (u64); 56 bytes.
constexpr size_t kHeaderBytes = 56, kVendorOffset = 8, kChecksumOffset = 48;

std::unique_ptr<Context> OpenWithCache(const std::string& path) {
  ContextOptions options = ValidatedOptions();
  options.pipeline_cache_path = path;
  auto context = Context::Create(options);
  INFO(context.status().ToString());
  REQUIRE(context.ok());
  return std::move(context).value();
}

AttentionParams SmallCall() {
  AttentionParams p;
  p.shape = {1, 2, 1, 9, 14, 32};
  p.causal = true;
  return p;
}

}  // namespace

TEST_CASE("a pipeline is created once per kernel variant", "[pipeline-cache]") {
  auto context = OpenWithCache("");
  CHECK(context->pipeline_cache_state() == PipelineCacheState::kNotUsed);
  // The context made its probes' pipelines already: the loop budget's, and on devices with tensor
  // cores the accumulator layout's.
  const size_t start = context->pipeline_count();
  CHECK(start == (context->device_info().cooperative_matrix == CooperativeMatrixApi::kNone ? 1u : 2u));
  AttentionParams p = SmallCall();
  RunForwardCase(*context, p, 1);
  CHECK(context->pipeline_count() == start + 1);
  RunForwardCase(*context, p, 2);  // same variant, same constants
  CHECK(context->pipeline_count() == start + 1);
  p.shape.q_len = 30;  // a different length is a push constant, not a new pipeline
  RunForwardCase(*context, p, 3);
  CHECK(context->pipeline_count() == start + 1);
  p.causal = false;  // a different specialization constant
  RunForwardCase(*context, p, 4);
  CHECK(context->pipeline_count() == start + 2);
  RequireNoValidationMessages();
}

TEST_CASE("pipeline cache: save, reload, and refuse foreign or corrupt files", "[pipeline-cache]") {
  const std::string path = TempPath("pipeline_cache");
  std::remove(path.c_str());
  {
    auto context = OpenWithCache(path);
    CHECK(context->pipeline_cache_state() == PipelineCacheState::kStartedEmpty);
    const ForwardRun run = RunForwardCase(*context, SmallCall(), 1);
    CHECK(run.o_error <= ForwardTolerance(DataType::kFloat32));
    REQUIRE(context->SavePipelineCache().ok());
  }  // destruction saves again
  const std::vector<uint8_t> good = ReadFile(path);
  REQUIRE(good.size() > kHeaderBytes);

  SECTION("a file from this device and driver is loaded and works") {
    auto context = OpenWithCache(path);
    CHECK(context->pipeline_cache_state() == PipelineCacheState::kLoaded);
    const ForwardRun run = RunForwardCase(*context, SmallCall(), 2);
    CHECK(run.o_error <= ForwardTolerance(DataType::kFloat32));
  }
  SECTION("a file from another device (checksum intact) is ignored") {
    std::vector<uint8_t> foreign = good;
    foreign[kVendorOffset] ^= 0x5a;  // another vendor id; the checksum covers only the blob
    WriteFile(path, foreign);
    auto context = OpenWithCache(path);
    CHECK(context->pipeline_cache_state() == PipelineCacheState::kIgnoredForeign);
    CHECK(RunForwardCase(*context, SmallCall(), 3).o_error <= ForwardTolerance(DataType::kFloat32));
  }
  SECTION("a driver blob from another device inside a well-formed file is ignored") {
    std::vector<uint8_t> foreign = good;
    foreign[kHeaderBytes + 8] ^= 0x5a;  // the driver header's vendor id
    const uint64_t checksum = Fnv1a64(foreign.data() + kHeaderBytes, foreign.size() - kHeaderBytes);
    std::memcpy(foreign.data() + kChecksumOffset, &checksum, 8);
    WriteFile(path, foreign);
    auto context = OpenWithCache(path);
    CHECK(context->pipeline_cache_state() == PipelineCacheState::kIgnoredForeign);
  }
  SECTION("a flipped byte in the blob is detected") {
    std::vector<uint8_t> corrupt = good;
    corrupt[corrupt.size() - 1] ^= 0xff;
    WriteFile(path, corrupt);
    auto context = OpenWithCache(path);
    CHECK(context->pipeline_cache_state() == PipelineCacheState::kIgnoredCorrupt);
    CHECK(RunForwardCase(*context, SmallCall(), 4).o_error <= ForwardTolerance(DataType::kFloat32));
  }
  SECTION("a file that cannot be opened is ignored, not an error") {
    // Unreadable for any user but root (whose open succeeds: then the file is used).
    std::filesystem::permissions(path, std::filesystem::perms::none);
    std::FILE* probe = std::fopen(path.c_str(), "rb");
    const bool readable = probe != nullptr;
    if (probe != nullptr) std::fclose(probe);
    auto context = OpenWithCache(path);
    CHECK(context->pipeline_cache_state() ==
          (readable ? PipelineCacheState::kLoaded : PipelineCacheState::kIgnoredUnreadable));
    CHECK(RunForwardCase(*context, SmallCall(), 5).o_error <= ForwardTolerance(DataType::kFloat32));
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  SECTION("truncated and foreign-format files are detected") {
    WriteFile(path, std::vector<uint8_t>(good.begin(), good.begin() + 30));
    CHECK(OpenWithCache(path)->pipeline_cache_state() == PipelineCacheState::kIgnoredCorrupt);
    WriteFile(path, std::vector<uint8_t>(good.begin(), good.end() - 7));
    CHECK(OpenWithCache(path)->pipeline_cache_state() == PipelineCacheState::kIgnoredCorrupt);
    WriteFile(path, std::vector<uint8_t>(200, 'x'));
    CHECK(OpenWithCache(path)->pipeline_cache_state() == PipelineCacheState::kIgnoredCorrupt);
  }
  std::remove(path.c_str());
  RequireNoValidationMessages();
}

TEST_CASE("pipeline cache: a directory as the path is an error, not a crash", "[pipeline-cache]") {
  ContextOptions options = ValidatedOptions();
  options.pipeline_cache_path = ".";
  auto context = Context::Create(options);
  REQUIRE_FALSE(context.ok());
  CHECK(context.status().code() == ErrorCode::kInvalidArgument);
  CHECK(context.status().message().find("directory") != std::string::npos);
  // Saving to a directory: refused with a status too.
  auto plain = OpenWithCache("");
  const Status saved = plain->SavePipelineCache(".");
  CHECK_FALSE(saved.ok());
  CHECK(saved.message().find("directory") != std::string::npos);
  RequireNoValidationMessages();
}

