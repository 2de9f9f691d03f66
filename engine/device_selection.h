// Which physical device a Context uses: by index, by name substring, or the best one.
#pragma once

#include <vkflash/device_info.hpp>

#include <vector>

#include "vulkan/instance.h"

namespace vkflash {

// Probes every physical device of `instance`.
Result<std::vector<DeviceInfo>> ProbeAllDevices(const vk::Instance& instance, std::vector<VkPhysicalDevice>* handles);

// `selector`: all digits = index; otherwise a case-insensitive substring of the name; empty = the
// best (discrete > integrated > virtual > CPU, then the first).
// kDeviceNotFound names the devices.
Result<uint32_t> SelectDevice(const std::vector<DeviceInfo>& devices, const std::string& selector);

}  // namespace vkflash
