// The viewer's own Vulkan instance and device (as an engine would have them), with vkflash
// adopted onto them: the viewer records vkflash's forward into its own command buffers.
#pragma once

#include <vkflash/device_info.hpp>

#include <memory>
#include <string>

struct GLFWwindow;

namespace viewer {

// Why no device could be made: "no display" and "no device" are exit code 2 for the viewer.
struct SetupError {
  bool no_display = false;
  std::string message;
};

class ViewerDevice {
 public:
  // window == nullptr: headless (no surface, no swapchain). validation: the Khronos layer with
  // synchronization validation; its messages are counted (validation_messages()).
  static std::unique_ptr<ViewerDevice> Create(GLFWwindow* window, bool validation, SetupError* error);
  ~ViewerDevice();

  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return family_; }
  VkSurfaceKHR surface() const { return surface_; }
  VkCommandPool command_pool() const { return pool_; }
  vkflash::Context& flash() { return *flash_; }
  int validation_messages() const { return messages_; }
  uint32_t MemoryType(uint32_t allowed, VkMemoryPropertyFlags flags) const;

 private:
  ViewerDevice() = default;
  static VKAPI_ATTR VkBool32 VKAPI_CALL OnMessage(VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT,
                                                  const VkDebugUtilsMessengerCallbackDataEXT*, void*);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkSurfaceKHR surface_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::unique_ptr<vkflash::Context> flash_;
  int messages_ = 0;
};

}  // namespace viewer
