#include "render_target.h"

#include <stb/stb_image_write.h>

#include <algorithm>

namespace viewer {

std::unique_ptr<RenderTarget> RenderTarget::Create(ViewerDevice& device, bool windowed, VkExtent2D size,
                                                   std::string* error) {
  auto target = std::unique_ptr<RenderTarget>(new RenderTarget(device));
  if (windowed) {
    uint32_t count = 0;
    vkGetPhysicalDeviceSurfaceFormatsKHR(device.physical(), device.surface(), &count, nullptr);
    std::vector<VkSurfaceFormatKHR> formats(count);
    vkGetPhysicalDeviceSurfaceFormatsKHR(device.physical(), device.surface(), &count, formats.data());
    if (formats.empty()) {
      *error = "the window surface offers no formats";
      return nullptr;
    }
    target->format_ = formats[0].format;
    for (const auto& f : formats)  // UNORM: the canvas colors are written as they should look
      if (f.format == VK_FORMAT_B8G8R8A8_UNORM || f.format == VK_FORMAT_R8G8B8A8_UNORM) target->format_ = f.format;
  } else {
    target->format_ = VK_FORMAT_R8G8B8A8_UNORM;
  }

  // ImGui draws over the blitted canvas: load, then hand the image to present / read-back.
  VkAttachmentDescription color{};
  color.format = target->format_;
  color.samples = VK_SAMPLE_COUNT_1_BIT;
  color.loadOp = VK_ATTACHMENT_LOAD_OP_LOAD;
  color.storeOp = VK_ATTACHMENT_STORE_OP_STORE;
  color.stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE;
  color.stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE;
  color.initialLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL;
  color.finalLayout = windowed ? VK_IMAGE_LAYOUT_PRESENT_SRC_KHR : VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
  VkAttachmentReference ref{0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkSubpassDescription subpass{};
  subpass.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS;
  subpass.colorAttachmentCount = 1;
  subpass.pColorAttachments = &ref;
  VkSubpassDependency dependencies[2] = {};
  // In: the canvas blit's writes before the attachment is loaded.
  dependencies[0].srcSubpass = VK_SUBPASS_EXTERNAL;
  dependencies[0].dstSubpass = 0;
  dependencies[0].srcStageMask = VK_PIPELINE_STAGE_TRANSFER_BIT;
  dependencies[0].srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  dependencies[0].dstStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
  dependencies[0].dstAccessMask = VK_ACCESS_COLOR_ATTACHMENT_READ_BIT | VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT;
  // Out: ImGui's writes and the final layout transition before a screenshot copy reads the image.
  dependencies[1].srcSubpass = 0;
  dependencies[1].dstSubpass = VK_SUBPASS_EXTERNAL;
  dependencies[1].srcStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
  dependencies[1].srcAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT;
  dependencies[1].dstStageMask = VK_PIPELINE_STAGE_TRANSFER_BIT;
  dependencies[1].dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
  VkRenderPassCreateInfo pass{VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO};
  pass.attachmentCount = 1;
  pass.pAttachments = &color;
  pass.subpassCount = 1;
  pass.pSubpasses = &subpass;
  pass.dependencyCount = 2;
  pass.pDependencies = dependencies;
  if (vkCreateRenderPass(device.device(), &pass, nullptr, &target->render_pass_) != VK_SUCCESS) {
    *error = "cannot create the render pass";
    return nullptr;
  }
  const bool made = windowed ? target->CreateSwapchain(size, error) : target->CreateOffscreen(size, error);
  if (!made || !target->CreateViewsAndFramebuffers(error)) return nullptr;
  return target;
}

bool RenderTarget::CreateSwapchain(VkExtent2D size, std::string* error) {
  VkSurfaceCapabilitiesKHR caps;
  vkGetPhysicalDeviceSurfaceCapabilitiesKHR(device_.physical(), device_.surface(), &caps);
  const VkImageUsageFlags usage =
      VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT;
  if ((caps.supportedUsageFlags & usage) != usage) {
    *error = "the swapchain cannot be a blit target and a copy source (needed for the canvas and screenshots)";
    return false;
  }
  extent_ = caps.currentExtent.width != 0xffffffffu
                ? caps.currentExtent
                : VkExtent2D{std::clamp(size.width, caps.minImageExtent.width, caps.maxImageExtent.width),
                             std::clamp(size.height, caps.minImageExtent.height, caps.maxImageExtent.height)};
  uint32_t images = std::max(caps.minImageCount + 1, 2u);
  if (caps.maxImageCount) images = std::min(images, caps.maxImageCount);
  VkSwapchainCreateInfoKHR info{VK_STRUCTURE_TYPE_SWAPCHAIN_CREATE_INFO_KHR};
  info.surface = device_.surface();
  info.minImageCount = images;
  info.imageFormat = format_;
  info.imageColorSpace = VK_COLOR_SPACE_SRGB_NONLINEAR_KHR;
  info.imageExtent = extent_;
  info.imageArrayLayers = 1;
  info.imageUsage = usage;
  info.imageSharingMode = VK_SHARING_MODE_EXCLUSIVE;
  info.preTransform = caps.currentTransform;
  info.compositeAlpha = VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR;
  info.presentMode = VK_PRESENT_MODE_FIFO_KHR;  // always available
  info.clipped = VK_TRUE;
  info.oldSwapchain = swapchain_;
  VkSwapchainKHR swapchain = VK_NULL_HANDLE;
  if (vkCreateSwapchainKHR(device_.device(), &info, nullptr, &swapchain) != VK_SUCCESS) {
    *error = "cannot create the swapchain";
    return false;
  }
  if (swapchain_) vkDestroySwapchainKHR(device_.device(), swapchain_, nullptr);
  swapchain_ = swapchain;
  uint32_t count = 0;
  vkGetSwapchainImagesKHR(device_.device(), swapchain_, &count, nullptr);
  images_.resize(count);
  vkGetSwapchainImagesKHR(device_.device(), swapchain_, &count, images_.data());
  return true;
}

bool RenderTarget::CreateOffscreen(VkExtent2D size, std::string* error) {
  extent_ = size;
  VkImageCreateInfo info{VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO};
  info.imageType = VK_IMAGE_TYPE_2D;
  info.format = format_;
  info.extent = {size.width, size.height, 1};
  info.mipLevels = 1;
  info.arrayLayers = 1;
  info.samples = VK_SAMPLE_COUNT_1_BIT;
  info.tiling = VK_IMAGE_TILING_OPTIMAL;
  info.usage = VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT;
  if (vkCreateImage(device_.device(), &info, nullptr, &offscreen_) != VK_SUCCESS) {
    *error = "cannot create the offscreen image";
    return false;
  }
  VkMemoryRequirements req;
  vkGetImageMemoryRequirements(device_.device(), offscreen_, &req);
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = device_.MemoryType(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  vkAllocateMemory(device_.device(), &alloc, nullptr, &offscreen_memory_);
  vkBindImageMemory(device_.device(), offscreen_, offscreen_memory_, 0);
  images_ = {offscreen_};
  return true;
}

bool RenderTarget::CreateViewsAndFramebuffers(std::string* error) {
  for (VkImage image : images_) {
    VkImageViewCreateInfo view{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
    view.image = image;
    view.viewType = VK_IMAGE_VIEW_TYPE_2D;
    view.format = format_;
    view.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    VkImageView v;
    VkFramebuffer f;
    if (vkCreateImageView(device_.device(), &view, nullptr, &v) != VK_SUCCESS) return *error = "image view", false;
    views_.push_back(v);
    VkFramebufferCreateInfo fb{VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO};
    fb.renderPass = render_pass_;
    fb.attachmentCount = 1;
    fb.pAttachments = &v;
    fb.width = extent_.width;
    fb.height = extent_.height;
    fb.layers = 1;
    if (vkCreateFramebuffer(device_.device(), &fb, nullptr, &f) != VK_SUCCESS) return *error = "framebuffer", false;
    framebuffers_.push_back(f);
  }
  // Host-visible buffer the screenshot is copied into.
  VkBufferCreateInfo buffer{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  buffer.size = VkDeviceSize(extent_.width) * extent_.height * 4;
  buffer.usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  vkCreateBuffer(device_.device(), &buffer, nullptr, &readback_);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_.device(), readback_, &req);
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = device_.MemoryType(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  vkAllocateMemory(device_.device(), &alloc, nullptr, &readback_memory_);
  vkBindBufferMemory(device_.device(), readback_, readback_memory_, 0);
  return true;
}

void RenderTarget::DestroySizeDependent() {
  VkDevice d = device_.device();
  for (VkFramebuffer f : framebuffers_) vkDestroyFramebuffer(d, f, nullptr);
  for (VkImageView v : views_) vkDestroyImageView(d, v, nullptr);
  framebuffers_.clear();
  views_.clear();
  vkDestroyBuffer(d, readback_, nullptr);
  vkFreeMemory(d, readback_memory_, nullptr);
  readback_ = VK_NULL_HANDLE;
  readback_memory_ = VK_NULL_HANDLE;
}

bool RenderTarget::Resize(VkExtent2D size, std::string* error) {
  vkDeviceWaitIdle(device_.device());
  DestroySizeDependent();
  return CreateSwapchain(size, error) && CreateViewsAndFramebuffers(error);
}

VkResult RenderTarget::Acquire(VkSemaphore ready, uint32_t* index) {
  return vkAcquireNextImageKHR(device_.device(), swapchain_, UINT64_MAX, ready, VK_NULL_HANDLE, index);
}

VkResult RenderTarget::Present(uint32_t index, VkSemaphore rendered) {
  VkPresentInfoKHR present{VK_STRUCTURE_TYPE_PRESENT_INFO_KHR};
  present.waitSemaphoreCount = 1;
  present.pWaitSemaphores = &rendered;
  present.swapchainCount = 1;
  present.pSwapchains = &swapchain_;
  present.pImageIndices = &index;
  return vkQueuePresentKHR(device_.queue(), &present);
}

void RenderTarget::RecordScreenshot(VkCommandBuffer cmd, uint32_t i) {
  const VkImageLayout final_layout = windowed() ? VK_IMAGE_LAYOUT_PRESENT_SRC_KHR : VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
  VkImageMemoryBarrier barrier{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
  barrier.srcAccessMask = 0;  // the render pass's outgoing dependency made the writes available
  barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
  barrier.oldLayout = final_layout;
  barrier.newLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
  barrier.srcQueueFamilyIndex = barrier.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  barrier.image = images_[i];
  barrier.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, nullptr, 0, nullptr, 1,
                       &barrier);
  VkBufferImageCopy region{};
  region.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
  region.imageExtent = {extent_.width, extent_.height, 1};
  vkCmdCopyImageToBuffer(cmd, images_[i], VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, readback_, 1, &region);
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
  barrier.dstAccessMask = 0;
  barrier.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
  barrier.newLayout = final_layout;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0, nullptr, 0, nullptr,
                       1, &barrier);
  VkMemoryBarrier host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &host, 0, nullptr, 0, nullptr);
}

bool RenderTarget::WritePng(const std::string& path) {
  void* mapped = nullptr;
  if (vkMapMemory(device_.device(), readback_memory_, 0, VK_WHOLE_SIZE, 0, &mapped) != VK_SUCCESS) return false;
  std::vector<uint8_t> rgba(static_cast<uint8_t*>(mapped), static_cast<uint8_t*>(mapped) + size_t(extent_.width) * extent_.height * 4);
  vkUnmapMemory(device_.device(), readback_memory_);
  const bool bgra = format_ == VK_FORMAT_B8G8R8A8_UNORM || format_ == VK_FORMAT_B8G8R8A8_SRGB;
  for (size_t i = 0; i < rgba.size(); i += 4) {
    if (bgra) std::swap(rgba[i], rgba[i + 2]);
    rgba[i + 3] = 255;
  }
  return stbi_write_png(path.c_str(), int(extent_.width), int(extent_.height), 4, rgba.data(), int(extent_.width) * 4) != 0;
}

RenderTarget::~RenderTarget() {
  VkDevice d = device_.device();
  vkDeviceWaitIdle(d);
  DestroySizeDependent();
  if (swapchain_) vkDestroySwapchainKHR(d, swapchain_, nullptr);
  if (offscreen_) vkDestroyImage(d, offscreen_, nullptr);
  if (offscreen_memory_) vkFreeMemory(d, offscreen_memory_, nullptr);
  if (render_pass_) vkDestroyRenderPass(d, render_pass_, nullptr);
}

}  // namespace viewer
