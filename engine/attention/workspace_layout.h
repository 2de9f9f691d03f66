// The parts of one workspace buffer that the operators bind separately (per-row state of a
// chunked pass, the backward's delta, ...): consecutive, each starting at an offset a storage
// buffer may be bound at.
#pragma once

#include <vkflash/device_info.hpp>

#include <algorithm>

namespace vkflash::attention {

class WorkspaceLayout {
 public:
  explicit WorkspaceLayout(const DeviceInfo& device)
      : alignment_(std::max<VkDeviceSize>(device.min_storage_buffer_offset_alignment, 16)) {}

  // Appends a part of `bytes` and returns its offset from the workspace's start.
  VkDeviceSize Add(VkDeviceSize bytes) {
    const VkDeviceSize offset = (bytes_ + alignment_ - 1) / alignment_ * alignment_;
    bytes_ = offset + bytes;
    return offset;
  }
  VkDeviceSize bytes() const { return bytes_; }

 private:
  VkDeviceSize alignment_;
  VkDeviceSize bytes_ = 0;
};

// The part [offset, offset + bytes) of `workspace`.
inline BufferView WorkspacePart(const BufferView& workspace, VkDeviceSize offset, VkDeviceSize bytes) {
  return {workspace.buffer, workspace.offset + offset, bytes};
}

}  // namespace vkflash::attention
