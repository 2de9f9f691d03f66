// Buffers with their own VkDeviceMemory (one allocation per buffer: vkflash allocates a handful
// of large tensors, not thousands of small objects, so no sub-allocator).
#pragma once

#include <vkflash/device_info.hpp>

#include "vulkan/device.h"

namespace vkflash::vk {

// A buffer and its memory, freed by the destructor. Move-only.
class ScopedBuffer {
 public:
  // Memory must have all of `required` flags; among those types, one with `preferred` wins.
  // Host-visible memory is mapped for the buffer's lifetime (mapped() != nullptr).
  static Result<ScopedBuffer> Create(const Device& device, VkDeviceSize size, VkBufferUsageFlags usage,
                                     VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred = 0);
  ScopedBuffer() = default;
  ScopedBuffer(ScopedBuffer&& other) noexcept { *this = std::move(other); }
  ScopedBuffer& operator=(ScopedBuffer&& other) noexcept;
  ~ScopedBuffer() { Reset(); }

  // Hands the handles over to the caller, who frees them with FreeBufferAndMemory.
  void Release(VkBuffer* buffer, VkDeviceMemory* memory);
  void Reset();

  VkBuffer buffer() const { return buffer_; }
  VkDeviceSize size() const { return size_; }
  void* mapped() const { return mapped_; }

 private:
  const Device* device_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  void* mapped_ = nullptr;
};

// Frees a buffer of `size` bytes made by ScopedBuffer::Create (and counts it as freed).
void FreeBufferAndMemory(const Device& device, VkBuffer buffer, VkDeviceMemory memory, VkDeviceSize size);

}  // namespace vkflash::vk
