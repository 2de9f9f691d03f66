// The read-bandwidth probe (shaders/probes/read_stream.comp): reads given bytes once, for
// benchmarks that compare a decode step with the device's read ceiling over the same bytes.
#pragma once

#include <vkflash/device_info.hpp>

#include <memory>
#include <span>

#include "vulkan/device.h"
#include "vulkan/kernel_layout.h"
#include "vulkan/pipeline_store.h"

namespace vkflash::attention {

class ReadStreamOperator {
 public:
  static Result<std::unique_ptr<ReadStreamOperator>> Create(const vk::Device& device, const DeviceInfo& info,
                                                            vk::PipelineStore& pipelines);
  // One dispatch per source (sizes multiples of 16 bytes), none waiting for another; each of its
  // workgroups writes the XOR of the words it read to its own 16 bytes of `sink`, in a part of its
  // own per source: SinkBytes(sources) in all.
  Status Record(VkCommandBuffer cmd, std::span<const BufferView> sources, const BufferView& sink);
  uint64_t SinkBytes(std::span<const BufferView> sources) const;
  void Forget(VkBuffer buffer) { layout_->Forget(buffer); }

 private:
  ReadStreamOperator(const DeviceInfo& info, vk::PipelineStore& pipelines) : info_(info), pipelines_(pipelines) {}
  // Workgroups that read a source of `words` 16-byte words.
  uint32_t Workgroups(uint64_t words) const;
  // Its part of the sink, to the next offset a storage buffer may be bound at.
  uint64_t SinkPartBytes(uint64_t words) const;

  const DeviceInfo& info_;
  vk::PipelineStore& pipelines_;
  std::unique_ptr<vk::KernelLayout> layout_;
};

}  // namespace vkflash::attention
