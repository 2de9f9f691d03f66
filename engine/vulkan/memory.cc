#include "vulkan/memory.h"

#include <algorithm>
#include <string>
#include <utility>

#include "util/status_macros.h"
#include "util/vk_check.h"

namespace vkflash::vk {
namespace {

int FindMemoryType(const VkPhysicalDeviceMemoryProperties& props, uint32_t allowed_types,
                   VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) {
  int fallback = -1;
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i) {
    if (!(allowed_types & (1u << i))) continue;
    const VkMemoryPropertyFlags flags = props.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred) return int(i);
    if (fallback < 0) fallback = int(i);
  }
  return fallback;
}

bool IsOutOfMemory(VkResult result) {
  return result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY;
}

Status OutOfMemory(const Device& device, VkDeviceSize size, VkResult result) {
  return Status::Error(ErrorCode::kOutOfMemory,
                       "out of " + std::string(result == VK_ERROR_OUT_OF_HOST_MEMORY ? "host" : "device") +
                           " memory for a buffer of " + std::to_string(size) + " bytes (vkflash holds " +
                           std::to_string(device.allocated_bytes()) + " bytes of buffers already)",
                       result);
}

}  // namespace

Result<ScopedBuffer> ScopedBuffer::Create(const Device& device, VkDeviceSize size, VkBufferUsageFlags usage,
                                          VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) {
  if (size == 0) return Status::Error(ErrorCode::kInvalidArgument, "a buffer needs a size > 0");
  ScopedBuffer result;
  result.device_ = &device;

  if (device.max_buffer_bytes() > 0 && size > device.max_buffer_bytes()) {  // invalid usage, not a failure
    return Status::Error(ErrorCode::kOutOfMemory, "a buffer of " + std::to_string(size) +
                                                      " bytes is larger than this device's maxBufferSize (" +
                                                      std::to_string(device.max_buffer_bytes()) + ")");
  }
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  const VkResult created = vkCreateBuffer(device.handle(), &info, nullptr, &result.buffer_);
  if (IsOutOfMemory(created)) return OutOfMemory(device, size, created);
  VKF_VK_RETURN_IF_ERROR(created, "vkCreateBuffer");

  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(device.handle(), result.buffer_, &requirements);
  const int type = FindMemoryType(device.memory_properties(), requirements.memoryTypeBits, required, preferred);
  if (type < 0) {
    return Status::Error(ErrorCode::kUnsupported, "no memory type with the properties a buffer needs");
  }
  // Larger than the heap or than maxMemoryAllocationSize is not a failed allocation but invalid
  // usage: refuse it here, with the numbers.
  const VkDeviceSize heap_bytes =
      device.memory_properties().memoryHeaps[device.memory_properties().memoryTypes[type].heapIndex].size;
  const VkDeviceSize limit =
      device.max_allocation_bytes() > 0 ? std::min(heap_bytes, device.max_allocation_bytes()) : heap_bytes;
  if (requirements.size > limit) {
    return Status::Error(ErrorCode::kOutOfMemory, "a buffer of " + std::to_string(size) +
                                                      " bytes is larger than this device allows in one allocation (" +
                                                      std::to_string(limit) + " bytes)");
  }
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = requirements.size;
  alloc.memoryTypeIndex = uint32_t(type);
  const VkResult allocated = vkAllocateMemory(device.handle(), &alloc, nullptr, &result.memory_);
  if (IsOutOfMemory(allocated)) return OutOfMemory(device, size, allocated);
  VKF_VK_RETURN_IF_ERROR(allocated, "vkAllocateMemory");
  result.size_ = size;
  device.OnAllocate(size);
  VKF_VK_RETURN_IF_ERROR(vkBindBufferMemory(device.handle(), result.buffer_, result.memory_, 0),
                         "vkBindBufferMemory");
  if (required & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    VKF_VK_RETURN_IF_ERROR(vkMapMemory(device.handle(), result.memory_, 0, VK_WHOLE_SIZE, 0, &result.mapped_),
                           "vkMapMemory");
  }
  return result;
}

ScopedBuffer& ScopedBuffer::operator=(ScopedBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    device_ = std::exchange(other.device_, nullptr);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, nullptr);
  }
  return *this;
}

void ScopedBuffer::Release(VkBuffer* buffer, VkDeviceMemory* memory) {
  *buffer = std::exchange(buffer_, VK_NULL_HANDLE);
  *memory = std::exchange(memory_, VK_NULL_HANDLE);
  mapped_ = nullptr;  // stays mapped; vkFreeMemory unmaps
  size_ = 0;
}

void ScopedBuffer::Reset() {
  if (device_ != nullptr) FreeBufferAndMemory(*device_, buffer_, memory_, size_);
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
  size_ = 0;
}

void FreeBufferAndMemory(const Device& device, VkBuffer buffer, VkDeviceMemory memory, VkDeviceSize size) {
  if (buffer != VK_NULL_HANDLE) vkDestroyBuffer(device.handle(), buffer, nullptr);
  if (memory != VK_NULL_HANDLE) {
    vkFreeMemory(device.handle(), memory, nullptr);
    device.OnFree(size);  // counted once the memory exists (see Create)
  }
}

}  // namespace vkflash::vk
