// The capabilities probe: what a VkPhysicalDevice offers (limits, features, extensions), and the
// portability knobs that make vkflash use less than that.
#pragma once

#include <vkflash/vkflash.hpp>

namespace vkflash::vk {

// Reads limits, features and extensions of `device` into a DeviceInfo. The "usable_*" / "use_*"
// fields start equal to what the device offers; ApplyLimits narrows them.
DeviceInfo ProbeDevice(VkInstance instance, uint32_t instance_api_version, VkPhysicalDevice device, uint32_t index);

// Applies ContextOptions and the VKFLASH_MAX_SHARED_BYTES / VKFLASH_DISABLE_SUBGROUP_OPS /
// VKFLASH_DISABLE_PUSH_DESCRIPTORS environment variables (options win when set).
// Then picks the kernel family (ChooseKernelFamily).
Status ApplyLimits(const ContextOptions& options, DeviceInfo* info);

// Sets DeviceInfo::cooperative_matrix from ContextOptions::kernels / VKFLASH_KERNELS and what the
// device and this build can run.
Status ChooseKernelFamily(const ContextOptions& options, DeviceInfo* info);

// ContextOptions::kernels, else VKFLASH_KERNELS, else "auto".
std::string KernelFamily(const ContextOptions& options);

// True if the device has a queue family with compute; `family` receives the best one
// (compute-only preferred, so that engines' graphics queues stay free).
bool FindComputeQueueFamily(VkPhysicalDevice device, uint32_t* family);

bool HasDeviceExtension(VkPhysicalDevice device, const char* name);

}  // namespace vkflash::vk
