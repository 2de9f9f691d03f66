// The interface of one family of kernels: N storage buffers in set 0 plus a push-constant block,
// and how buffers are bound for a dispatch:
//   - push descriptors (VK_KHR_push_descriptor) through an update template, where available:
//     nothing to allocate or free;
//   - otherwise descriptor sets from pools, one per distinct binding, cached so that an engine
//     that re-records the same buffers every frame allocates nothing after the first.
#pragma once

#include <vkflash/device_info.hpp>

#include <map>
#include <memory>
#include <span>
#include <vector>

#include "vulkan/device.h"

namespace vkflash::vk {

class KernelLayout {
 public:
  static Result<std::unique_ptr<KernelLayout>> Create(const Device& device, uint32_t buffer_count,
                                                      uint32_t push_constant_bytes);
  ~KernelLayout();
  KernelLayout(const KernelLayout&) = delete;
  KernelLayout& operator=(const KernelLayout&) = delete;

  VkPipelineLayout pipeline_layout() const { return pipeline_layout_; }
  bool uses_push_descriptors() const { return push_descriptors_ != nullptr; }

  // Binds `buffers` (binding i = buffers[i]; every view non-empty) to set 0 of `cmd`.
  Status BindBuffers(VkCommandBuffer cmd, std::span<const BufferView> buffers);
  // Frees cached descriptor sets that reference `buffer` (pool path only).
  void Forget(VkBuffer buffer);

 private:
  struct CachedSet {
    VkDescriptorSet set;
    VkDescriptorPool pool;
  };
  using BindingKey = std::vector<VkDescriptorBufferInfo>;
  struct KeyLess {
    bool operator()(const BindingKey& a, const BindingKey& b) const;
  };

  explicit KernelLayout(const Device& device) : device_(device) {}
  Result<VkDescriptorSet> AllocateSet();

  const Device& device_;
  uint32_t buffer_count_ = 0;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkDescriptorUpdateTemplate update_template_ = VK_NULL_HANDLE;
  PFN_vkCmdPushDescriptorSetWithTemplateKHR push_descriptors_ = nullptr;

  // Pool path.
  std::vector<VkDescriptorPool> pools_;
  std::map<BindingKey, CachedSet, KeyLess> cached_sets_;
  VkDescriptorPool last_pool_used_ = VK_NULL_HANDLE;
};

}  // namespace vkflash::vk
