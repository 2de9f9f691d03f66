// The backward operator: checks a call, picks tiles, and records the preprocess dispatch, one
// barrier, and the dK/dV and dQ dispatches (see Context::RecordBackward for the contract).
#pragma once

#include <vkflash/vkflash.hpp>

#include <memory>

#include "attention/coopmat_layout.h"
#include "vulkan/device.h"
#include "vulkan/kernel_layout.h"
#include "vulkan/pipeline_store.h"

namespace vkflash::attention {

class BackwardOperator {
 public:
  static Result<std::unique_ptr<BackwardOperator>> Create(const vk::Device& device, const DeviceInfo& info,
                                                          const CoopmatLayout& layout, vk::PipelineStore& pipelines);

  // buffers.workspace must be set.
  Status Record(VkCommandBuffer cmd, const AttentionParams& params, const BackwardBuffers& buffers);
  void Forget(VkBuffer buffer) { layout_->Forget(buffer); }

 private:
  BackwardOperator(const DeviceInfo& info, const CoopmatLayout& layout, vk::PipelineStore& pipelines)
      : info_(info), coopmat_layout_(layout), pipelines_(pipelines) {}
  Result<VkPipeline> Pipeline(const KernelChoice& choice, const AttentionParams& params);

  const DeviceInfo& info_;
  const CoopmatLayout& coopmat_layout_;
  vk::PipelineStore& pipelines_;
  std::unique_ptr<vk::KernelLayout> layout_;
};

}  // namespace vkflash::attention
