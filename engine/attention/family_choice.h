// Which kernel families a Context may use, decided once when it starts: from the resolved
// ContextOptions::kernels, what the device offers (DeviceInfo, after the portability limits) and
// which kernels this build has. Each family in KernelBackends() says whether it can run
// (WhyUnusable) and records its use in DeviceInfo (use_decode_kernels, use_cooperative_matrix2,
// cooperative_matrix), which its Applies() reads per call. Adding a family adds no code here.
#pragma once

#include <vkflash/device_info.hpp>

#include <string>

namespace vkflash::attention {

// `kernels`: the resolved ContextOptions::kernels. "auto": every family that can run here;
// "coopmat": the same, at least one of them on tensor cores; a family's name (or one of
// its variants, e.g. "coopmat_nv"): that family, which must be able to run, then the families after
// it in KernelBackends() for the calls it does not take. kUnsupported when the family asked for
// cannot run here; kInvalidArgument for an unknown name.
Status ChooseKernelFamily(const std::string& kernels, DeviceInfo* info);

// Whether the Context uses a family whose loops may run past a driver's loop budget (the tensor-core
// ones), and leaves only the families that keep within it.
bool UsesFamilyPastLoopBudget(const DeviceInfo& info);
void KeepFamiliesWithinLoopBudget(DeviceInfo* info);
// Whether `kernels` (ContextOptions::kernels) names a family that cannot keep within a loop budget
// ("coopmat", "coopmat2", ...): a Context on such a driver fails rather than run another.
bool AsksForFamilyPastLoopBudget(const std::string& kernels);

}  // namespace vkflash::attention
