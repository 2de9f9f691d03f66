// Where the viewer's frames go: a window's swapchain, or (headless, for GPU machines without a
// display) one offscreen image. Either way: a render pass for ImGui that loads what the canvas
// blit left, framebuffers, and a screenshot read back from the image itself.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>
#include <string>
#include <vector>

#include "viewer_device.h"

namespace viewer {

class RenderTarget {
 public:
  // window == nullptr: headless, `size` pixels.
  static std::unique_ptr<RenderTarget> Create(ViewerDevice& device, bool windowed, VkExtent2D size, std::string* error);
  ~RenderTarget();

  // Recreates the swapchain for a new window size (the render pass and format stay).
  bool Resize(VkExtent2D size, std::string* error);

  // Windowed: acquires an image (signals `ready`); VK_ERROR_OUT_OF_DATE_KHR asks for Resize.
  VkResult Acquire(VkSemaphore ready, uint32_t* index);
  VkResult Present(uint32_t index, VkSemaphore rendered);

  VkFormat format() const { return format_; }
  VkExtent2D extent() const { return extent_; }
  uint32_t image_count() const { return uint32_t(images_.size()); }
  VkImage image(uint32_t i) const { return images_[i]; }
  VkFramebuffer framebuffer(uint32_t i) const { return framebuffers_[i]; }
  VkRenderPass render_pass() const { return render_pass_; }
  bool windowed() const { return swapchain_ != VK_NULL_HANDLE; }

  // Records a copy of image `i` (after the render pass) into a host buffer; WritePng() saves it
  // once the command buffer has completed.
  void RecordScreenshot(VkCommandBuffer cmd, uint32_t i);
  bool WritePng(const std::string& path);

 private:
  explicit RenderTarget(ViewerDevice& device) : device_(device) {}
  bool CreateSwapchain(VkExtent2D size, std::string* error);
  bool CreateOffscreen(VkExtent2D size, std::string* error);
  bool CreateViewsAndFramebuffers(std::string* error);
  void DestroySizeDependent();

  ViewerDevice& device_;
  VkSwapchainKHR swapchain_ = VK_NULL_HANDLE;
  VkFormat format_ = VK_FORMAT_B8G8R8A8_UNORM;
  VkExtent2D extent_{};
  VkRenderPass render_pass_ = VK_NULL_HANDLE;
  std::vector<VkImage> images_;
  std::vector<VkImageView> views_;
  std::vector<VkFramebuffer> framebuffers_;
  VkImage offscreen_ = VK_NULL_HANDLE;
  VkDeviceMemory offscreen_memory_ = VK_NULL_HANDLE;
  VkBuffer readback_ = VK_NULL_HANDLE;
  VkDeviceMemory readback_memory_ = VK_NULL_HANDLE;
};

}  // namespace viewer
