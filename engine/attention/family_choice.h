// Which kernel families a Context may use, decided once when it starts: from the resolved
// ContextOptions::kernels, what the device offers (DeviceInfo, after the portability limits) and
// which kernels this build has. Sets DeviceInfo::cooperative_matrix, use_cooperative_matrix2 and
// cooperative_matrix_note; the families' Applies() read them per call.
#pragma once

#include <vkflash/device_info.hpp>

#include <string>

namespace vkflash::attention {

// `family`: the resolved ContextOptions::kernels. kUnsupported when the family asked for cannot
// run here; kInvalidArgument for an unknown name.
Status ChooseKernelFamily(const std::string& family, DeviceInfo* info);

}  // namespace vkflash::attention
