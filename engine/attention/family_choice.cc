#include "attention/family_choice.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "attention/backends/kernel_backend.h"

namespace vkflash::attention {
namespace {

// Every family but the last, portable one.
std::span<const KernelBackend* const> AcceleratedFamilies() {
  const auto families = KernelBackends();
  return families.first(families.size() - 1);
}

// "auto, coopmat, decode, coopmat2, coopmat_khr, coopmat_nv or scalar", for messages.
std::string KernelsValuesText() {
  const std::vector<std::string> values = KernelsOptionValues();
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
  return text;
}

}  // namespace

Status ChooseKernelFamily(const std::string& kernels, DeviceInfo* info) {
  const auto families = KernelBackends();
  for (const KernelBackend* family : families) family->Unuse(info);
  auto unsupported = [&](const std::string& what) {
    return Status::Error(ErrorCode::kUnsupported, "kernels '" + kernels + "': " + what + " on '" + info->name + "'");
  };

  // "auto": every family that can run here. "coopmat": the same, but at least one on tensor cores.
  if (kernels == "auto" || kernels == "coopmat") {
    bool tensor_cores = false;
    for (const KernelBackend* family : AcceleratedFamilies()) {
      if (!family->WhyUnusable(*info, "").empty()) continue;
      family->Use(info, "");
      tensor_cores = tensor_cores || family->uses_tensor_cores();
    }
    if (!tensor_cores) {
      if (kernels == "coopmat") return unsupported("no usable cooperative-matrix extension");
      info->cooperative_matrix_note = info->nv_cooperative_matrix || info->khr_cooperative_matrix
                                          ? "the device lacks a feature the kernels need (or this build lacks them)"
                                          : "no cooperative-matrix extension";
    }
    return Status::Ok();
  }

  // One family (a variant of it) by name: it must be usable; it runs what it applies to, and the
  // families after it in KernelBackends() run the rest.
  for (size_t i = 0; i < families.size(); ++i) {
    const auto variants = families[i]->variants();
    if (std::find(variants.begin(), variants.end(), kernels) == variants.end()) continue;
    if (std::string why = families[i]->WhyUnusable(*info, kernels); !why.empty()) return unsupported(why);
    families[i]->Use(info, kernels);
    for (const KernelBackend* fallback : families.subspan(i + 1)) {
      if (fallback->WhyUnusable(*info, "").empty()) fallback->Use(info, "");
    }
    if (i + 1 == families.size()) info->cooperative_matrix_note = kernels + " kernels asked for";
    return Status::Ok();
  }
  return Status::Error(ErrorCode::kInvalidArgument, "kernels '" + kernels + "': expected " + KernelsValuesText());
}

bool UsesFamilyPastLoopBudget(const DeviceInfo& info) {
  const auto families = KernelBackends();
  return std::any_of(families.begin(), families.end(),
                     [&](const KernelBackend* f) { return !f->runs_within_loop_budget() && f->Used(info); });
}

bool AsksForFamilyPastLoopBudget(const std::string& kernels) {
  if (kernels == "auto") return false;
  if (kernels == "coopmat") return true;
  for (const KernelBackend* family : KernelBackends()) {
    const auto variants = family->variants();
    if (std::find(variants.begin(), variants.end(), kernels) != variants.end()) return !family->runs_within_loop_budget();
  }
  return true;
}

void KeepFamiliesWithinLoopBudget(DeviceInfo* info) {
  for (const KernelBackend* family : KernelBackends()) {
    if (!family->runs_within_loop_budget()) family->Unuse(info);
  }
}

}  // namespace vkflash::attention

namespace vkflash {

std::vector<std::string> KernelsOptionValues() {
  std::vector<std::string> values = {"auto", "coopmat"};
  for (const attention::KernelBackend* family : attention::KernelBackends()) {
    for (std::string_view variant : family->variants()) values.emplace_back(variant);
  }
  return values;
}

}  // namespace vkflash
