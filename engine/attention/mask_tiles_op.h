// The mask's block summary (shaders/scalar/attention_mask_tiles.comp): one bit per 16 x 16 block
// of each mask head, whether the mask leaves some pair of it open. The forward and backward
// operators record it into their workspace before their kernels, which skip the tiles whose blocks
// are all closed (the mask_closes_* functions in shaders/common/score_mod.glsl).
#pragma once

#include <vkflash/device_info.hpp>

#include <memory>

#include "attention/call_layout.h"
#include "vulkan/device.h"
#include "vulkan/kernel_layout.h"
#include "vulkan/pipeline_store.h"

namespace vkflash::attention {

class MaskTilesOperator {
 public:
  static Result<std::unique_ptr<MaskTilesOperator>> Create(const vk::Device& device, const DeviceInfo& info,
                                                           vk::PipelineStore& pipelines);
  // Bytes of the summary of the call's mask: 0 without one (or with an empty one).
  static uint64_t SummaryBytes(const CallLayout& call);

  // Records the summary's dispatch: reads `mask` (checked by the caller), writes `summary`
  // (SummaryBytes). The caller records the barrier before the kernels that read it.
  Status Record(VkCommandBuffer cmd, const CallLayout& call, const BufferView& mask, const BufferView& summary);
  void Forget(VkBuffer buffer) { layout_->Forget(buffer); }

 private:
  MaskTilesOperator(const DeviceInfo& info, vk::PipelineStore& pipelines) : info_(info), pipelines_(pipelines) {}

  const DeviceInfo& info_;
  vk::PipelineStore& pipelines_;
  std::unique_ptr<vk::KernelLayout> layout_;
};

}  // namespace vkflash::attention
