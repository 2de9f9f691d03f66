// A kernel family: the kernels built for one kind of hardware support, and how it picks their
// tiles for a call from the device's limits. The families (one file each in this folder):
//   decode    few query rows over many keys: split-K and grouped-query packing (shaders/decode/);
//   scalar    plain GLSL, any Vulkan 1.1 device (shaders/scalar/);
//   coopmat   subgroup-scope cooperative matrices, VK_NV_ or VK_KHR_cooperative_matrix (shaders/coopmat/);
//   coopmat2  VK_NV_cooperative_matrix2, workgroup-scope matrices and driver reductions (shaders/coopmat2/).
// KernelBackends() lists them preferred first: decode, coopmat2, coopmat, scalar.
// Which families a Context may use is decided once, when it starts (family_choice.h, from each
// family's WhyUnusable / Use); which one runs a call, per call (kernel_choice.h: the first in
// KernelBackends() that applies and fits).
#pragma once

#include <vkflash/device_info.hpp>

#include <span>
#include <string>
#include <string_view>

#include "attention/coopmat_layout.h"
#include "attention/kernel_constants.h"

namespace vkflash::attention {

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;

  // "scalar", "coopmat" or "coopmat2": KernelChoice::family of its kernels, and messages.
  virtual const char* name() const = 0;

  // --- Whether a Context may use the family: decided once, when it starts (family_choice.h). ---

  // The ContextOptions::kernels values that ask for this family: one per variant the family
  // builds its kernels for (coopmat: "coopmat_nv" and "coopmat_khr"), else its name.
  virtual std::span<const std::string_view> variants() const = 0;
  // Why the family cannot run on this device with this build's kernels, "" when it can: in the
  // variant `variant` names, or ("") in any.
  virtual std::string WhyUnusable(const DeviceInfo& device, std::string_view variant) const = 0;
  // Records in DeviceInfo that the Context uses the family (in `variant`; "": the first usable
  // one) or does not; Applies() reads it. Use only after WhyUnusable returned "".
  virtual void Use(DeviceInfo* device, std::string_view variant) const = 0;
  virtual void Unuse(DeviceInfo* device) const = 0;
  virtual bool Used(const DeviceInfo& device) const = 0;
  // Whether its kernels run on tensor cores (what ContextOptions::kernels "coopmat" asks for).
  virtual bool uses_tensor_cores() const { return false; }
  // Whether its kernels keep every invocation's loops within DeviceInfo::shader_loop_budget (in
  // chunks or parts); a Context on a driver with a budget uses only such families.
  virtual bool runs_within_loop_budget() const { return false; }

  // --- Per call. ---

  // Whether this family may run the call here: the Context uses it and the kernels take this
  // dtype and head dim.
  virtual bool Applies(const DeviceInfo& device, const AttentionParams& params) const = 0;

  // The first tile of the family's tables that the device's limits allow; kUnsupported if none.
  // `overrides`: tiles to try first (ContextOptions::tile_overrides, for tuning).
  virtual Result<KernelChoice> ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                             const TileOverrides& overrides) const = 0;
  virtual Result<BackwardKernelChoice> ChooseBackward(const DeviceInfo& device, const AttentionParams& params,
                                                      const TileOverrides& overrides) const = 0;

  // The family's specialization constants beyond those every kernel takes (MakeSpecConstants).
  virtual void SetSpecConstants(const KernelChoice& choice, const CoopmatLayout& layout, SpecConstants* spec) const;
};

// Every family, preferred first. The last, scalar, is usable everywhere and applies to every call.
std::span<const KernelBackend* const> KernelBackends();

// The family that chose `choice` (KernelChoice::family, which ChooseForwardKernel and
// ChooseBackwardKernels fill in).
Result<const KernelBackend*> BackendOf(const KernelChoice& choice);

}  // namespace vkflash::attention
