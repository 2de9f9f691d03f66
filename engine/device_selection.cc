#include "device_selection.h"

#include <algorithm>
#include <cctype>
#include <memory>

#include "context_options.h"
#include "util/status_macros.h"
#include "util/vk_check.h"
#include "vulkan/device_caps.h"
#include "vulkan/instance.h"

namespace vkflash {
namespace {

int TypeRank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
  }
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string DeviceList(const std::vector<DeviceInfo>& devices) {
  std::string list;
  for (const auto& d : devices) list += (list.empty() ? "" : ", ") + std::to_string(d.index) + ": " + d.name;
  return list.empty() ? "none" : list;
}

}  // namespace

Result<std::vector<DeviceInfo>> ProbeAllDevices(const vk::Instance& instance, std::vector<VkPhysicalDevice>* handles) {
  uint32_t count = 0;
  VKF_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDevices(instance.handle(), &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> physical(count);
  VKF_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDevices(instance.handle(), &count, physical.data()),
                         "vkEnumeratePhysicalDevices");
  physical.resize(count);
  std::vector<DeviceInfo> devices;
  for (uint32_t i = 0; i < count; ++i) {
    devices.push_back(vk::ProbeDevice(instance.handle(), instance.api_version(), physical[i], i));
  }
  if (handles) *handles = std::move(physical);
  return devices;
}

Result<uint32_t> SelectDevice(const std::vector<DeviceInfo>& devices, const std::string& selector) {
  if (devices.empty()) {
    return Status::Error(ErrorCode::kDeviceNotFound,
                         "no Vulkan device found (on a machine without a GPU, install mesa-vulkan-drivers for lavapipe)");
  }
  if (selector.empty()) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < devices.size(); ++i)
      if (TypeRank(devices[i].type) > TypeRank(devices[best].type)) best = i;
    return best;
  }
  if (std::all_of(selector.begin(), selector.end(), [](unsigned char c) { return std::isdigit(c); })) {
    const unsigned long index = selector.size() > 9 ? devices.size() : std::stoul(selector);
    if (index < devices.size()) return uint32_t(index);
    return Status::Error(ErrorCode::kDeviceNotFound,
                         "no Vulkan device with index " + selector + " (devices: " + DeviceList(devices) + ")");
  }
  for (uint32_t i = 0; i < devices.size(); ++i)
    if (Lower(devices[i].name).find(Lower(selector)) != std::string::npos) return i;
  return Status::Error(ErrorCode::kDeviceNotFound,
                       "no Vulkan device whose name contains '" + selector + "' (devices: " + DeviceList(devices) + ")");
}

Result<uint32_t> SelectDeviceIndex(const std::string& selector) {
  VKF_ASSIGN_OR_RETURN(auto devices, EnumerateDevices());
  return SelectDevice(devices, ResolveDeviceSelector(selector));
}

Result<std::vector<DeviceInfo>> EnumerateDevices() {
  VKF_ASSIGN_OR_RETURN(auto instance, vk::Instance::Create(false, nullptr));
  return ProbeAllDevices(*instance, nullptr);
}

}  // namespace vkflash
