// The forward operator: checks a call, picks the kernel variant and tiles, and records one
// dispatch. No barriers are recorded here (see Context::RecordForward for the contract).
#pragma once

#include <vkflash/vkflash.hpp>

#include <memory>

#include "vulkan/device.h"
#include "vulkan/kernel_layout.h"
#include "vulkan/pipeline_store.h"

namespace vkflash::attention {

class ForwardOperator {
 public:
  static Result<std::unique_ptr<ForwardOperator>> Create(const vk::Device& device, const DeviceInfo& info,
                                                         vk::PipelineStore& pipelines);

  Status Record(VkCommandBuffer cmd, const AttentionParams& params, const ForwardBuffers& buffers);
  void Forget(VkBuffer buffer) { layout_->Forget(buffer); }

 private:
  ForwardOperator(const DeviceInfo& info, vk::PipelineStore& pipelines) : info_(info), pipelines_(pipelines) {}

  const DeviceInfo& info_;
  vk::PipelineStore& pipelines_;
  std::unique_ptr<vk::KernelLayout> layout_;
};

}  // namespace vkflash::attention
