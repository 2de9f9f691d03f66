// `vkflash backward`: dQ, dK, dV (and dSinks, dBias) from Q, K, V and dO .npy files (runs the forward for
// O and LSE).
#include <memory>
#include <optional>
#include <string>

#include "attention_io.h"
#include "cli_error.h"
#include "commands.h"
#include "output_files.h"

namespace vkflash::cli {
namespace {

struct BackwardOptions {
  std::string q, k, v, d_o, dq, dk, dv, dsinks, dbias, device;
  bool nondeterministic = false;
  VariantOptions variants;
  std::optional<float> scale;
  SequenceOptions sequences;
};

int RunBackwardCommand(const BackwardOptions& options) {
  if (!options.dsinks.empty() && options.variants.sinks.empty()) {
    return ReportBadInput("--dsinks needs --sinks: it is the sinks' gradient");
  }
  if (!options.dbias.empty() && options.variants.mask.empty()) {
    return ReportBadInput("--dbias needs --mask: it is the gradient of an additive (float) mask");
  }
  OutputFiles files;
  for (const std::string& input :
       {options.q, options.k, options.v, options.d_o, options.variants.alibi, options.variants.sinks, options.variants.mask})
    if (!input.empty()) files.AddInput(input);
  Status status = files.Plan("--dq", options.dq);
  if (status.ok()) status = files.Plan("--dk", options.dk);
  if (status.ok()) status = files.Plan("--dv", options.dv);
  if (status.ok() && !options.dsinks.empty()) status = files.Plan("--dsinks", options.dsinks);
  if (status.ok() && !options.dbias.empty()) status = files.Plan("--dbias", options.dbias);
  if (!status.ok()) return ReportError(status);

  auto inputs = LoadAttentionInputs(options.q, options.k, options.v, options.variants, options.scale, options.sequences);
  if (!inputs.ok()) return ReportError(inputs.status());
  if (!options.dbias.empty() && inputs->params.mask.type == MaskType::kBool) {
    return ReportBadInput("--dbias needs an additive (float32 or float16) --mask; '" + options.variants.mask +
                          "' is bool, which has no gradient");
  }
  inputs->params.deterministic = !options.nondeterministic;
  auto d_o = tools::ReadNpy(options.d_o);
  if (!d_o.ok()) return ReportError(d_o.status());
  if (d_o->shape != inputs->q.shape || d_o->dtype != inputs->q.dtype) {
    return ReportBadInput("dO '" + options.d_o + "' must have the shape and dtype of Q");
  }
  auto context = OpenContext(options.device);
  if (!context.ok()) return ReportError(context.status());
  auto grads = RunBackward(**context, *inputs, *d_o, !options.dsinks.empty(), !options.dbias.empty());
  if (!grads.ok()) return ReportError(grads.status());

  status = files.Stage(options.dq, grads->dq);
  if (status.ok()) status = files.Stage(options.dk, grads->dk);
  if (status.ok()) status = files.Stage(options.dv, grads->dv);
  if (status.ok() && !options.dsinks.empty()) status = files.Stage(options.dsinks, grads->dsinks);
  if (status.ok() && !options.dbias.empty()) status = files.Stage(options.dbias, grads->dbias);
  if (status.ok()) status = files.Commit();
  if (!status.ok()) return ReportError(status);
  return kExitOk;
}

}  // namespace

Command AddBackwardCommand(CLI::App& parent) {
  auto options = std::make_shared<BackwardOptions>();
  CLI::App* app = parent.add_subcommand("backward", "Attention backward: dQ, dK, dV of sum(O * dO)");
  app->add_option("--q", options->q, "Q [B, Hq, Nq, D] (.npy, float32 or float16)")->required();
  app->add_option("--k", options->k, "K [B, Hkv, Nk, D]")->required();
  app->add_option("--v", options->v, "V [B, Hkv, Nk, D]")->required();
  app->add_option("--do", options->d_o, "dO, the gradient of O (like Q)")->required();
  app->add_option("--dq", options->dq, "dQ output, like Q")->required();
  app->add_option("--dk", options->dk, "dK output, like K")->required();
  app->add_option("--dv", options->dv, "dV output, like V")->required();
  AddVariantOptions(app, &options->variants);
  app->add_option("--dsinks", options->dsinks, "dSinks output, float32 [Hq]: the gradient of the sinks (needs --sinks)");
  app->add_option("--dbias", options->dbias,
                  "dBias output, float32 of the mask's shape: the gradient of an additive --mask (summed over the "
                  "dimensions it broadcasts)");
  app->add_option("--scale", options->scale, "Softmax scale (default 1/sqrt(D))");
  app->add_flag("--nondeterministic", options->nondeterministic,
                "Allow a faster way to dQ where the kernels and device have one: float atomics (the last bits of dQ "
                "vary from run to run) or dS stored in the workspace (N x N per head)");
  app->add_option("--device", options->device, "Device index or name substring (default: VKFLASH_DEVICE, else the best)");
  AddSequenceOptions(app, &options->sequences);
  return {app, [options]() { return RunBackwardCommand(*options); }};
}

}  // namespace vkflash::cli
