// A kernel family: the kernels built for one kind of hardware support, and how it picks their
// tiles for a call from the device's limits. The families (one file each in this folder):
//   scalar    plain GLSL, any Vulkan 1.1 device (shaders/scalar/);
//   coopmat   subgroup-scope cooperative matrices, VK_NV_ or VK_KHR_cooperative_matrix (shaders/coopmat/);
//   coopmat2  VK_NV_cooperative_matrix2, workgroup-scope matrices and driver reductions (shaders/coopmat2/).
// Which families a Context may use is decided once, when it starts (family_choice.h); which one
// runs a call, per call (kernel_choice.h: the first in KernelBackends() that applies and fits).
#pragma once

#include <vkflash/device_info.hpp>

#include <span>

#include "attention/coopmat_layout.h"
#include "attention/kernel_constants.h"

namespace vkflash::attention {

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;

  // "scalar", "coopmat" or "coopmat2", for messages.
  virtual const char* name() const = 0;

  // Whether `choice` names one of this family's kernels.
  virtual bool Chose(const KernelChoice& choice) const = 0;

  // Whether this family may run the call here: the Context chose it (DeviceInfo) and the kernels
  // take this dtype and head dim.
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

// Every family, preferred first. The last, scalar, applies to every call.
std::span<const KernelBackend* const> KernelBackends();

// The family whose kernel `choice` names.
const KernelBackend& BackendOf(const KernelChoice& choice);

}  // namespace vkflash::attention
