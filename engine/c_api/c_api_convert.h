// Translations between the C API's structs (include/vkflash/vkflash.h) and the C++ API's. Each
// reader checks struct_size and the enums, and defaults what an older caller's struct lacks.
#pragma once

#include <vkflash/device_info.hpp>
#include <vkflash/vkflash.h>
#include <vkflash/vkflash.hpp>

namespace vkflash::c_api {

Status ToAttentionParams(const VkfAttentionParams& in, AttentionParams* out);
Status ToTensorLayout(VkfTensorLayout in, TensorLayout* out);
// `in` may be NULL: the defaults.
Status ToContextOptions(const VkfContextCreateInfo* in, ContextOptions* out);
Status ToExternalDevice(const VkfExternalDevice& in, ExternalDevice* out);
Status ToForwardBuffers(const VkfForwardBuffers& in, ForwardBuffers* out);
Status ToBackwardBuffers(const VkfBackwardBuffers& in, BackwardBuffers* out);

BufferView ToBufferView(const VkfBufferView& in);
VkfBufferView ToVkfBufferView(const BufferView& in);
VkfTensorStrides ToVkfTensorStrides(const TensorStrides& in);

// Into the caller's struct, as far as its struct_size reaches.
Status WriteDeviceInfo(const DeviceInfo& in, VkfDeviceInfo* out);
Status WriteKernelChoice(const KernelChoice& in, VkfKernelChoice* out);

// VkfDeviceInfo as the caller sees it: for arrays whose stride is the caller's struct_size.
Status CheckDeviceInfoStride(uint32_t struct_size);

}  // namespace vkflash::c_api
