// VkInstance owned by vkflash (Context::Create), with optional validation + debug messenger.
#pragma once

#include <vkflash/device_info.hpp>

#include <memory>

namespace vkflash::vk {

class Instance {
 public:
  using MessageCallback = std::function<void(MessageSeverity, const std::string&)>;

  // Vulkan 1.1 or newer (up to 1.3). With `enable_validation`, VK_LAYER_KHRONOS_validation is
  // enabled with synchronization validation, and its warnings and errors go to `callback`
  // (stderr when null).
  static Result<std::unique_ptr<Instance>> Create(bool enable_validation, MessageCallback callback);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  uint32_t api_version() const { return api_version_; }

 private:
  Instance() = default;
  static VKAPI_ATTR VkBool32 VKAPI_CALL OnDebugMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                      VkDebugUtilsMessageTypeFlagsEXT types,
                                                      const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                      void* user);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  uint32_t api_version_ = VK_API_VERSION_1_1;
  MessageCallback callback_;
};

}  // namespace vkflash::vk
