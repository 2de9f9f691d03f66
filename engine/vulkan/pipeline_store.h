// Compute pipelines, created once per (SPIR-V digest, specialization constants) and kept for the
// context's lifetime, on top of a VkPipelineCache that persists to disk (pipeline_cache_file.h).
#pragma once

#include <vkflash/device_info.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "vulkan/device.h"
#include "vulkan/shader_library.h"

namespace vkflash::vk {

class PipelineStore {
 public:
  // Loads `cache_path` when set (see PipelineCacheState for what can happen to it).
  static Result<std::unique_ptr<PipelineStore>> Create(const Device& device, const DeviceInfo& info,
                                                       const std::string& cache_path);
  ~PipelineStore();
  PipelineStore(const PipelineStore&) = delete;
  PipelineStore& operator=(const PipelineStore&) = delete;

  // The pipeline for `shader` with specialization constant i = spec_values[i], made on first use.
  Result<VkPipeline> Get(const ShaderBlob& shader, VkPipelineLayout layout, std::span<const uint32_t> spec_values);

  Status Save(const std::string& path) const;
  PipelineCacheState state() const { return state_; }
  size_t pipeline_count() const;

 private:
  using Key = std::pair<uint64_t, std::vector<uint32_t>>;  // SPIR-V digest, constants

  PipelineStore(const Device& device, const DeviceInfo& info) : device_(device), info_(info) {}

  const Device& device_;
  const DeviceInfo info_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  PipelineCacheState state_ = PipelineCacheState::kNotUsed;
  std::map<Key, VkPipeline> pipelines_;
  std::map<const uint32_t*, uint64_t> digests_;  // per embedded SPIR-V: hashed once, not per dispatch
  mutable std::mutex mutex_;
};

}  // namespace vkflash::vk
