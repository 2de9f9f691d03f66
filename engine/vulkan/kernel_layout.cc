#include "vulkan/kernel_layout.h"

#include <tuple>

#include "util/status_macros.h"
#include "util/vk_check.h"

namespace vkflash::vk {
namespace {
constexpr uint32_t kSetsPerPool = 64;
}

bool KernelLayout::KeyLess::operator()(const BindingKey& a, const BindingKey& b) const {
  if (a.size() != b.size()) return a.size() < b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const auto ka = std::make_tuple(reinterpret_cast<uintptr_t>(a[i].buffer), a[i].offset, a[i].range);
    const auto kb = std::make_tuple(reinterpret_cast<uintptr_t>(b[i].buffer), b[i].offset, b[i].range);
    if (ka != kb) return ka < kb;
  }
  return false;
}

Result<std::unique_ptr<KernelLayout>> KernelLayout::Create(const Device& device, uint32_t buffer_count,
                                                           uint32_t push_constant_bytes) {
  auto layout = std::unique_ptr<KernelLayout>(new KernelLayout(device));
  layout->buffer_count_ = buffer_count;
  layout->push_descriptors_ = device.push_descriptor_with_template();

  std::vector<VkDescriptorSetLayoutBinding> bindings(buffer_count);
  for (uint32_t i = 0; i < buffer_count; ++i) {
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  }
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  if (layout->uses_push_descriptors()) set_info.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  set_info.bindingCount = buffer_count;
  set_info.pBindings = bindings.data();
  VKF_VK_RETURN_IF_ERROR(vkCreateDescriptorSetLayout(device.handle(), &set_info, nullptr, &layout->set_layout_),
                         "vkCreateDescriptorSetLayout");

  VkPushConstantRange push_range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_constant_bytes};
  VkPipelineLayoutCreateInfo pipeline_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pipeline_info.setLayoutCount = 1;
  pipeline_info.pSetLayouts = &layout->set_layout_;
  pipeline_info.pushConstantRangeCount = push_constant_bytes ? 1 : 0;
  pipeline_info.pPushConstantRanges = &push_range;
  VKF_VK_RETURN_IF_ERROR(vkCreatePipelineLayout(device.handle(), &pipeline_info, nullptr, &layout->pipeline_layout_),
                         "vkCreatePipelineLayout");

  // One template serves both paths: the data is an array of VkDescriptorBufferInfo.
  VkDescriptorUpdateTemplateEntry entry{};
  entry.dstBinding = 0;
  entry.dstArrayElement = 0;
  entry.descriptorCount = buffer_count;  // consecutive bindings of one type, one descriptor each
  entry.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  entry.offset = 0;
  entry.stride = sizeof(VkDescriptorBufferInfo);
  VkDescriptorUpdateTemplateCreateInfo template_info{VK_STRUCTURE_TYPE_DESCRIPTOR_UPDATE_TEMPLATE_CREATE_INFO};
  template_info.descriptorUpdateEntryCount = 1;
  template_info.pDescriptorUpdateEntries = &entry;
  if (layout->uses_push_descriptors()) {
    template_info.templateType = VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS_KHR;
    template_info.pipelineBindPoint = VK_PIPELINE_BIND_POINT_COMPUTE;
    template_info.pipelineLayout = layout->pipeline_layout_;
    template_info.set = 0;
  } else {
    template_info.templateType = VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_DESCRIPTOR_SET;
  }
  template_info.descriptorSetLayout = layout->set_layout_;
  VKF_VK_RETURN_IF_ERROR(
      vkCreateDescriptorUpdateTemplate(device.handle(), &template_info, nullptr, &layout->update_template_),
      "vkCreateDescriptorUpdateTemplate");
  return layout;
}

KernelLayout::~KernelLayout() {
  const VkDevice device = device_.handle();
  for (VkDescriptorPool pool : pools_) vkDestroyDescriptorPool(device, pool, nullptr);  // frees the sets
  if (update_template_ != VK_NULL_HANDLE) vkDestroyDescriptorUpdateTemplate(device, update_template_, nullptr);
  if (pipeline_layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device, pipeline_layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device, set_layout_, nullptr);
}

Status KernelLayout::BindBuffers(VkCommandBuffer cmd, std::span<const BufferView> buffers) {
  if (buffers.size() != buffer_count_) {
    return Status::Error(ErrorCode::kInvalidArgument, "wrong number of buffers for this kernel");
  }
  BindingKey infos(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) infos[i] = {buffers[i].buffer, buffers[i].offset, buffers[i].size};

  if (uses_push_descriptors()) {
    push_descriptors_(cmd, update_template_, pipeline_layout_, 0, infos.data());
    return Status::Ok();
  }
  auto found = cached_sets_.find(infos);
  if (found == cached_sets_.end()) {
    VKF_ASSIGN_OR_RETURN(VkDescriptorSet set, AllocateSet());
    vkUpdateDescriptorSetWithTemplate(device_.handle(), set, update_template_, infos.data());
    found = cached_sets_.emplace(infos, CachedSet{set, last_pool_used_}).first;
  }
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &found->second.set, 0, nullptr);
  return Status::Ok();
}

Result<VkDescriptorSet> KernelLayout::AllocateSet() {
  VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  alloc.descriptorSetCount = 1;
  alloc.pSetLayouts = &set_layout_;
  VkDescriptorSet set = VK_NULL_HANDLE;
  // Try the existing pools (newest first), then grow by one pool.
  for (auto it = pools_.rbegin(); it != pools_.rend(); ++it) {
    alloc.descriptorPool = *it;
    const VkResult result = vkAllocateDescriptorSets(device_.handle(), &alloc, &set);
    if (result == VK_SUCCESS) {
      last_pool_used_ = *it;
      return set;
    }
    if (result != VK_ERROR_OUT_OF_POOL_MEMORY && result != VK_ERROR_FRAGMENTED_POOL) {
      return VkCheck(result, "vkAllocateDescriptorSets");
    }
  }
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * buffer_count_};
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pool_info.maxSets = kSetsPerPool;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VKF_VK_RETURN_IF_ERROR(vkCreateDescriptorPool(device_.handle(), &pool_info, nullptr, &pool), "vkCreateDescriptorPool");
  pools_.push_back(pool);
  alloc.descriptorPool = pool;
  VKF_VK_RETURN_IF_ERROR(vkAllocateDescriptorSets(device_.handle(), &alloc, &set), "vkAllocateDescriptorSets");
  last_pool_used_ = pool;
  return set;
}

void KernelLayout::Forget(VkBuffer buffer) {
  for (auto it = cached_sets_.begin(); it != cached_sets_.end();) {
    bool references = false;
    for (const auto& info : it->first) references |= info.buffer == buffer;
    if (references) {
      vkFreeDescriptorSets(device_.handle(), it->second.pool, 1, &it->second.set);
      it = cached_sets_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace vkflash::vk
