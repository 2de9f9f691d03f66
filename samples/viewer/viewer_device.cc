#include "viewer_device.h"

#define GLFW_INCLUDE_VULKAN
#include <GLFW/glfw3.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace viewer {
namespace {

bool HasExtension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data());
  for (const auto& e : extensions)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

}  // namespace

VkBool32 ViewerDevice::OnMessage(VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT,
                                 const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  ++static_cast<ViewerDevice*>(user)->messages_;
  std::fprintf(stderr, "vkflash-viewer: validation: %s\n", data->pMessage);
  return VK_FALSE;
}

std::unique_ptr<ViewerDevice> ViewerDevice::Create(GLFWwindow* window, bool validation, SetupError* error) {
  auto d = std::unique_ptr<ViewerDevice>(new ViewerDevice());
  std::vector<const char*> extensions, layers;
  if (window) {
    uint32_t count = 0;
    const char** names = glfwGetRequiredInstanceExtensions(&count);
    if (names == nullptr) {
      error->no_display = true;
      error->message = "GLFW finds no Vulkan surface support on this display";
      return nullptr;
    }
    extensions.assign(names, names + count);
  }
  VkDebugUtilsMessengerCreateInfoEXT messenger{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger.pfnUserCallback = OnMessage;
  messenger.pUserData = d.get();
  VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync;
  features.pNext = &messenger;
  if (validation) {
    layers.push_back("VK_LAYER_KHRONOS_validation");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkflash-viewer";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pNext = validation ? &features : nullptr;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = uint32_t(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  if (vkCreateInstance(&info, nullptr, &d->instance_) != VK_SUCCESS) {
    error->message = validation ? "cannot create a Vulkan instance with the validation layer" : "cannot create a Vulkan instance";
    return nullptr;
  }
  if (validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(vkGetInstanceProcAddr(d->instance_, "vkCreateDebugUtilsMessengerEXT"));
    create(d->instance_, &messenger, nullptr, &d->messenger_);
  }
  if (window && glfwCreateWindowSurface(d->instance_, window, nullptr, &d->surface_) != VK_SUCCESS) {
    error->no_display = true;
    error->message = "cannot create a Vulkan surface for the window";
    return nullptr;
  }

  // The device vkflash would pick (VKFLASH_DEVICE is honoured), if it has a queue that computes,
  // draws and (windowed) presents.
  uint32_t count = 0;
  vkEnumeratePhysicalDevices(d->instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(d->instance_, &count, devices.data());
  if (count == 0) {
    error->message = "no Vulkan device found (without a GPU, install mesa-vulkan-drivers)";
    return nullptr;
  }
  const auto selected = vkflash::SelectDeviceIndex();  // the device vkflash would pick
  const uint32_t preferred = selected.ok() ? *selected : 0;
  for (uint32_t pass = 0; pass < 2 && d->physical_ == VK_NULL_HANDLE; ++pass) {
    for (uint32_t i = 0; i < count; ++i) {
      if (pass == 0 && i != preferred) continue;
      uint32_t families = 0;
      vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &families, nullptr);
      std::vector<VkQueueFamilyProperties> props(families);
      vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &families, props.data());
      for (uint32_t f = 0; f < families; ++f) {
        VkBool32 present = VK_TRUE;
        if (d->surface_) vkGetPhysicalDeviceSurfaceSupportKHR(devices[i], f, d->surface_, &present);
        const VkQueueFlags need = VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT;
        if ((props[f].queueFlags & need) == need && present) {
          d->physical_ = devices[i];
          d->family_ = f;
          break;
        }
      }
      if (d->physical_) break;
    }
  }
  if (d->physical_ == VK_NULL_HANDLE) {
    error->message = "no Vulkan device has a queue that computes, draws and presents";
    return nullptr;
  }

  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 supported{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  supported.pNext = &storage16;
  vkGetPhysicalDeviceFeatures2(d->physical_, &supported);
  std::vector<const char*> device_extensions;
  if (window) device_extensions.push_back(VK_KHR_SWAPCHAIN_EXTENSION_NAME);
  const bool push = HasExtension(d->physical_, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  if (push) device_extensions.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = d->family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkPhysicalDevice16BitStorageFeatures enable16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  enable16.storageBuffer16BitAccess = storage16.storageBuffer16BitAccess;
  VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device_info.pNext = &enable16;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue;
  device_info.enabledExtensionCount = uint32_t(device_extensions.size());
  device_info.ppEnabledExtensionNames = device_extensions.data();
  if (vkCreateDevice(d->physical_, &device_info, nullptr, &d->device_) != VK_SUCCESS) {
    error->message = "cannot create the Vulkan device";
    return nullptr;
  }
  vkGetDeviceQueue(d->device_, d->family_, 0, &d->queue_);
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = d->family_;
  vkCreateCommandPool(d->device_, &pool, nullptr, &d->pool_);

  vkflash::ExternalDevice external;
  external.instance = d->instance_;
  external.physical_device = d->physical_;
  external.device = d->device_;
  external.queue = d->queue_;
  external.queue_family_index = d->family_;
  external.api_version = VK_API_VERSION_1_1;
  external.enabled = (enable16.storageBuffer16BitAccess ? vkflash::kAdoptedStorageBuffer16Bit : 0u) |
                     (push ? vkflash::kAdoptedPushDescriptor : 0u);
  auto flash = vkflash::Context::Adopt(external);
  if (!flash.ok()) {
    error->message = "vkflash cannot use the device: " + flash.status().ToString();
    return nullptr;
  }
  d->flash_ = std::move(flash).value();
  return d;
}

uint32_t ViewerDevice::MemoryType(uint32_t allowed, VkMemoryPropertyFlags flags) const {
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory);
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i)
    if ((allowed & (1u << i)) && (memory.memoryTypes[i].propertyFlags & flags) == flags) return i;
  return 0;
}

ViewerDevice::~ViewerDevice() {
  if (device_) vkDeviceWaitIdle(device_);
  flash_.reset();  // vkflash's objects go before the device they live on
  if (pool_) vkDestroyCommandPool(device_, pool_, nullptr);
  if (device_) vkDestroyDevice(device_, nullptr);
  if (surface_) vkDestroySurfaceKHR(instance_, surface_, nullptr);
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    destroy(instance_, messenger_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

}  // namespace viewer
