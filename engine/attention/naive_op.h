// The naive baseline operator: S, softmax and PV as three passes through an Nq x Nk scores
// buffer, one (batch, head) at a time. Not FlashAttention: O(N^2) memory traffic, for
// benchmarks (the ratio to the fused kernels) and as a second GPU reference in tests.
#pragma once

#include <vkflash/device_info.hpp>

#include <memory>

#include "vulkan/device.h"
#include "vulkan/kernel_layout.h"
#include "vulkan/pipeline_store.h"

namespace vkflash::attention {

class NaiveOperator {
 public:
  static Result<std::unique_ptr<NaiveOperator>> Create(const vk::Device& device, const DeviceInfo& info,
                                                       vk::PipelineStore& pipelines);
  Status Record(VkCommandBuffer cmd, const AttentionParams& params, const ForwardBuffers& buffers,
                const BufferView& scores);
  void Forget(VkBuffer buffer) { layout_->Forget(buffer); }

 private:
  NaiveOperator(const DeviceInfo& info, vk::PipelineStore& pipelines) : info_(info), pipelines_(pipelines) {}

  const DeviceInfo& info_;
  vk::PipelineStore& pipelines_;
  std::unique_ptr<vk::KernelLayout> layout_;
};

}  // namespace vkflash::attention
