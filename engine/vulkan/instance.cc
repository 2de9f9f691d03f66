#include "vulkan/instance.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "util/status_macros.h"
#include "util/vk_check.h"

namespace vkflash::vk {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool HasLayer(const char* name) {
  uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(count);
  if (vkEnumerateInstanceLayerProperties(&count, layers.data()) < 0) return false;
  for (const auto& layer : layers)
    if (std::strcmp(layer.layerName, name) == 0) return true;
  return false;
}

}  // namespace

Result<std::unique_ptr<Instance>> Instance::Create(bool enable_validation, MessageCallback callback) {
  uint32_t loader_version = VK_API_VERSION_1_0;
  VKF_VK_RETURN_IF_ERROR(vkEnumerateInstanceVersion(&loader_version), "vkEnumerateInstanceVersion");
  if (loader_version < VK_API_VERSION_1_1) {
    return Status::Error(ErrorCode::kUnsupported, "the Vulkan loader only supports Vulkan 1.0; vkflash needs 1.1");
  }
  auto instance = std::unique_ptr<Instance>(new Instance());
  instance->api_version_ = loader_version < VK_API_VERSION_1_3 ? loader_version : VK_API_VERSION_1_3;
  instance->callback_ = std::move(callback);

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkflash";
  app.pEngineName = "vkflash";
  app.apiVersion = instance->api_version_;

  std::vector<const char*> layers, extensions;
  VkValidationFeatureEnableEXT enabled_features[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT validation_features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  validation_features.enabledValidationFeatureCount = 1;
  validation_features.pEnabledValidationFeatures = enabled_features;

  VkDebugUtilsMessengerCreateInfoEXT messenger_info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = &Instance::OnDebugMessage;
  messenger_info.pUserData = instance.get();

  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  if (enable_validation) {
    if (!HasLayer(kValidationLayer)) {
      return Status::Error(ErrorCode::kUnsupported,
                           "validation requested but VK_LAYER_KHRONOS_validation is not installed "
                           "(Debian: apt-get install vulkan-validationlayers)");
    }
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    // Messages from instance creation itself reach the callback through this chain.
    validation_features.pNext = &messenger_info;
    info.pNext = &validation_features;
  }
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VKF_VK_RETURN_IF_ERROR(vkCreateInstance(&info, nullptr, &instance->instance_), "vkCreateInstance");

  if (enable_validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance->instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (create == nullptr) {
      return Status::Error(ErrorCode::kUnsupported, "vkCreateDebugUtilsMessengerEXT is missing");
    }
    VKF_VK_RETURN_IF_ERROR(create(instance->instance_, &messenger_info, nullptr, &instance->messenger_),
                           "vkCreateDebugUtilsMessengerEXT");
  }
  return instance;
}

Instance::~Instance() {
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

VkBool32 Instance::OnDebugMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                  VkDebugUtilsMessageTypeFlagsEXT /*types*/,
                                  const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  const auto* self = static_cast<const Instance*>(user);
  const MessageSeverity level = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)     ? MessageSeverity::kError
                                : (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) ? MessageSeverity::kWarning
                                                                                               : MessageSeverity::kInfo;
  const std::string message = data && data->pMessage ? data->pMessage : "(no message)";
  if (self && self->callback_) {
    self->callback_(level, message);
  } else {
    std::fprintf(stderr, "vkflash [validation %s] %s\n", level == MessageSeverity::kError ? "error" : "warning",
                 message.c_str());
  }
  return VK_FALSE;  // never abort the call: the caller decides what a message means
}

}  // namespace vkflash::vk
