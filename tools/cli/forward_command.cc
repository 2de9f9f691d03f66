// `vkflash forward`: O (and optionally LSE) from Q, K, V .npy files.
#include <memory>
#include <optional>
#include <string>

#include "attention_io.h"
#include "cli_error.h"
#include "commands.h"
#include "output_files.h"

namespace vkflash::cli {
namespace {

struct ForwardOptions {
  std::string q, k, v, out, lse, device;
  VariantOptions variants;
  std::optional<float> scale;
  SequenceOptions sequences;
};

int RunForwardCommand(const ForwardOptions& options) {
  OutputFiles files;
  for (const std::string& input :
       {options.q, options.k, options.v, options.variants.alibi, options.variants.sinks, options.variants.mask})
    if (!input.empty()) files.AddInput(input);
  Status status = files.Plan("--out", options.out);
  if (status.ok() && !options.lse.empty()) status = files.Plan("--lse", options.lse);
  if (!status.ok()) return ReportError(status);

  auto inputs = LoadAttentionInputs(options.q, options.k, options.v, options.variants, options.scale, options.sequences);
  if (!inputs.ok()) return ReportError(inputs.status());
  auto context = OpenContext(options.device);
  if (!context.ok()) return ReportError(context.status());
  auto outputs = RunForward(**context, *inputs);
  if (!outputs.ok()) return ReportError(outputs.status());

  status = files.Stage(options.out, outputs->o);
  if (status.ok() && !options.lse.empty()) status = files.Stage(options.lse, outputs->lse);
  if (status.ok()) status = files.Commit();
  if (!status.ok()) return ReportError(status);
  return kExitOk;
}

}  // namespace

Command AddForwardCommand(CLI::App& parent) {
  auto options = std::make_shared<ForwardOptions>();
  CLI::App* app = parent.add_subcommand("forward", "Attention forward: O = softmax(scale * Q K^T) V, and LSE");
  app->add_option("--q", options->q, "Q [B, Hq, Nq, D] (.npy, float32 or float16)")->required();
  app->add_option("--k", options->k, "K [B, Hkv, Nk, D]")->required();
  app->add_option("--v", options->v, "V [B, Hkv, Nk, D]")->required();
  app->add_option("--out", options->out, "O output, like Q")->required();
  app->add_option("--lse", options->lse, "LSE output [B, Hq, Nq] float32 (natural log)");
  AddVariantOptions(app, &options->variants);
  app->add_option("--scale", options->scale, "Softmax scale (default 1/sqrt(D))");
  app->add_option("--device", options->device, "Device index or name substring (default: VKFLASH_DEVICE, else the best)");
  AddSequenceOptions(app, &options->sequences);
  return {app, [options]() { return RunForwardCommand(*options); }};
}

}  // namespace vkflash::cli
