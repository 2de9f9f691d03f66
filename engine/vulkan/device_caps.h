// The capabilities probe: what a VkPhysicalDevice offers (limits, features, extensions), and the
// portability limits that make vkflash use less than that.
#pragma once

#include <vkflash/device_info.hpp>

namespace vkflash::vk {

// Reads limits, features and extensions of `device` into a DeviceInfo. The "usable_*" / "use_*"
// fields start equal to what the device offers; ApplyLimits narrows them.
DeviceInfo ProbeDevice(VkInstance instance, uint32_t instance_api_version, VkPhysicalDevice device, uint32_t index);

// Narrows the "usable_*" / "use_*" fields to the (resolved) ContextOptions' portability limits.
void ApplyLimits(const ContextOptions& options, DeviceInfo* info);

// True if the device has a queue family with compute; `family` receives the best one
// (compute-only preferred, so that engines' graphics queues stay free).
bool FindComputeQueueFamily(VkPhysicalDevice device, uint32_t* family);

bool HasDeviceExtension(VkPhysicalDevice device, const char* name);

}  // namespace vkflash::vk
