// `vkflash check`: random inputs, the forward pass on the device, compared with the float64 CPU
// reference within the contract's tolerance; prints the error and the time. The quick start's
// first command ends with it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attention_io.h"
#include "cli_error.h"
#include "commands.h"
#include "half.h"
#include "reference_attention.h"

namespace vkflash::cli {
namespace {

struct CheckOptions {
  uint32_t batch = 2, q_heads = 8, kv_heads = 2, q_len = 256, kv_len = 384, head_dim = 64;
  std::string dtype = "f32", device;
  VariantOptions variants;
  std::optional<float> scale;
  uint32_t seed = 1, repeats = 5;
};

tools::NpyArray RandomArray(DataType dtype, std::vector<uint64_t> shape, std::mt19937& rng) {
  uint64_t count = 1;
  for (uint64_t d : shape) count *= d;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& x : values) x = normal(rng);
  return tools::MakeNpy(dtype, std::move(shape), values);
}

int RunCheck(const CheckOptions& options) {
  AttentionInputs in;
  AttentionParams& p = in.params;
  p.dtype = options.dtype == "f16" ? DataType::kFloat16 : DataType::kFloat32;
  Status applied = ApplyVariantOptions(options.variants, &p);
  if (!applied.ok()) return ReportError(applied);
  p.scale = options.scale;
  p.shape = {options.batch, options.q_heads, options.kv_heads, options.q_len, options.kv_len, options.head_dim};
  MakeVariantValues(options.variants, options.seed + 1, &in);  // sinks apart from Q's values
  Status valid = ValidateAttentionParams(p);
  if (!valid.ok()) return ReportError(valid);
  std::mt19937 rng(options.seed);
  in.q = RandomArray(p.dtype, {p.shape.batch, p.shape.q_heads, p.shape.q_len, p.shape.head_dim}, rng);
  in.k = RandomArray(p.dtype, {p.shape.batch, p.shape.kv_heads, p.shape.kv_len, p.shape.head_dim}, rng);
  in.v = RandomArray(p.dtype, {p.shape.batch, p.shape.kv_heads, p.shape.kv_len, p.shape.head_dim}, rng);

  auto context = OpenContext(options.device);
  if (!context.ok()) return ReportError(context.status());
  auto choice = (*context)->ChooseForwardKernel(p);
  if (!choice.ok()) return ReportError(choice.status());
  const DeviceInfo& device = (*context)->device_info();
  std::printf("device: %s (%s)\nkernel: %s  Br=%u Bc=%u threads/row=%u\n", device.name.c_str(),
              DeviceTypeName(device.type), choice->kernel.c_str(), choice->block_q, choice->block_kv,
              choice->threads_per_row);
  const std::string window = p.window.left == -1 && p.window.right == -1
                                 ? ""
                                 : " window=" + std::to_string(p.window.left) + "," + std::to_string(p.window.right);
  const std::string scores = ScoreVariantsText(p).empty() ? "" : " " + ScoreVariantsText(p);
  std::printf("shape:  B=%u Hq=%u Hkv=%u Nq=%u Nk=%u D=%u %s%s%s%s scale=%g\n", p.shape.batch, p.shape.q_heads,
              p.shape.kv_heads, p.shape.q_len, p.shape.kv_len, p.shape.head_dim, DataTypeName(p.dtype),
              p.causal ? " causal" : "", window.c_str(), scores.c_str(), p.effective_scale());

  // The first run creates the pipeline; the timed runs after it measure the forward itself
  // (wall clock around submit + wait: a sanity number, not a benchmark).
  auto outputs = RunForward(**context, in);
  if (!outputs.ok()) return ReportError(outputs.status());
  std::vector<double> times_ms;
  for (uint32_t i = 0; i < options.repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto again = RunForward(**context, in);
    if (!again.ok()) return ReportError(again.status());
    times_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }

  const auto reference = tools::ReferenceAttentionForward(p, ToFloats(in.q), ToFloats(in.k), ToFloats(in.v),
                                                         {in.alibi_slopes, in.sinks, MaskFloats(in)});
  const double o_error = tools::StoredRelativeError(ToFloats(outputs->o), reference.o, p.dtype);
  const double lse_error = tools::RelativeError(ToFloats(outputs->lse), reference.lse);
  const double tolerance = p.dtype == DataType::kFloat16 ? 5e-3 : 2e-4;
  const bool pass = o_error <= tolerance && lse_error <= tolerance;
  std::printf("O   relative error vs float64 CPU reference: %.3e (tolerance %.0e)\n", o_error, tolerance);
  std::printf("LSE relative error vs float64 CPU reference: %.3e (tolerance %.0e)\n", lse_error, tolerance);
  if (!times_ms.empty()) {
    std::sort(times_ms.begin(), times_ms.end());
    std::printf("time:   %.3f ms per forward incl. upload/download (median of %zu, wall clock)\n",
                times_ms[times_ms.size() / 2], times_ms.size());
  }
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? kExitOk : kExitFailure;
}

}  // namespace

Command AddCheckCommand(CLI::App& parent) {
  auto options = std::make_shared<CheckOptions>();
  CLI::App* app = parent.add_subcommand("check", "Run the forward pass on random inputs and compare with the CPU");
  app->add_option("--b", options->batch, "Batch")->capture_default_str();
  app->add_option("--hq", options->q_heads, "Query heads")->capture_default_str();
  app->add_option("--hkv", options->kv_heads, "Key/value heads")->capture_default_str();
  app->add_option("--nq", options->q_len, "Query length")->capture_default_str();
  app->add_option("--nk", options->kv_len, "Key/value length")->capture_default_str();
  app->add_option("--d", options->head_dim, "Head dim")->capture_default_str();
  app->add_option("--dtype", options->dtype, "f32 or f16")->check(CLI::IsMember({"f32", "f16"}))->capture_default_str();
  AddVariantOptions(app, &options->variants, VariantValues::kMade);
  app->add_option("--scale", options->scale, "Softmax scale (default 1/sqrt(D))");
  app->add_option("--seed", options->seed, "Random seed")->capture_default_str();
  app->add_option("--repeats", options->repeats, "Timed runs after the first")->capture_default_str();
  app->add_option("--device", options->device, "Device index or name substring");
  return {app, [options]() { return RunCheck(*options); }};
}

}  // namespace vkflash::cli
