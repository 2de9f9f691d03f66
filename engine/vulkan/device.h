// The VkDevice vkflash records and submits with: created by vkflash, or adopted from an engine
// (then never destroyed here).
#pragma once

#include <vkflash/device_info.hpp>

#include <atomic>
#include <memory>

namespace vkflash::vk {

class Device {
 public:
  // Creates a logical device on `physical` with one compute queue, enabling what `info` says
  // vkflash can use (16-bit storage, push descriptors).
  static Result<std::unique_ptr<Device>> Create(VkPhysicalDevice physical, const DeviceInfo& info,
                                                bool capture_pipeline_statistics = false);
  // Wraps an engine's device. `info` must already reflect what the engine enabled.
  static Result<std::unique_ptr<Device>> Adopt(const ExternalDevice& external, const DeviceInfo& info);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  VkPhysicalDevice physical() const { return physical_; }
  VkDevice handle() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return memory_properties_; }
  // maxMemoryAllocationSize: no single allocation may be larger.
  VkDeviceSize max_allocation_bytes() const { return max_allocation_bytes_; }
  // maxBufferSize where the device reports one (Vulkan 1.3), else 0.
  VkDeviceSize max_buffer_bytes() const { return max_buffer_bytes_; }

  // Bytes of the buffers vkflash holds on this device now, and the most since ResetPeak().
  // Kept by every allocation path (vk::ScopedBuffer), so tests can bound what a call allocates.
  void OnAllocate(uint64_t bytes) const;
  void OnFree(uint64_t bytes) const { allocated_bytes_ -= bytes; }
  uint64_t allocated_bytes() const { return allocated_bytes_; }
  uint64_t peak_allocated_bytes() const { return peak_allocated_bytes_; }
  void ResetPeak() const { peak_allocated_bytes_ = allocated_bytes_.load(); }

  // Non-null when push descriptors are in use (VK_KHR_push_descriptor enabled and not disabled).
  PFN_vkCmdPushDescriptorSetWithTemplateKHR push_descriptor_with_template() const { return push_with_template_; }
  // Pipelines capture driver statistics (VKFLASH_PIPELINE_STATISTICS, owned devices only).
  bool pipeline_statistics() const { return pipeline_statistics_; }

 private:
  Device() = default;
  Status LoadFunctions(bool use_push_descriptors);
  void ReadMemoryLimits();

  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  bool owned_ = false;
  bool pipeline_statistics_ = false;
  VkPhysicalDeviceMemoryProperties memory_properties_{};
  VkDeviceSize max_allocation_bytes_ = 0;
  VkDeviceSize max_buffer_bytes_ = 0;
  PFN_vkCmdPushDescriptorSetWithTemplateKHR push_with_template_ = nullptr;
  mutable std::atomic<uint64_t> allocated_bytes_{0};
  mutable std::atomic<uint64_t> peak_allocated_bytes_{0};
};

}  // namespace vkflash::vk
