#include "vulkan/pipeline_store.h"

#include "vulkan/pipeline_statistics.h"

#include "util/hash.h"
#include "util/status_macros.h"
#include "util/vk_check.h"
#include "vulkan/pipeline_cache_file.h"

namespace vkflash::vk {

Result<std::unique_ptr<PipelineStore>> PipelineStore::Create(const Device& device, const DeviceInfo& info,
                                                             const std::string& cache_path) {
  auto store = std::unique_ptr<PipelineStore>(new PipelineStore(device, info));
  CacheFileRead read;
  if (!cache_path.empty()) {
    VKF_ASSIGN_OR_RETURN(read, ReadPipelineCacheFile(cache_path, info));
    store->state_ = read.state;
  }
  VkPipelineCacheCreateInfo cache_info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  cache_info.initialDataSize = read.driver_blob.size();
  cache_info.pInitialData = read.driver_blob.empty() ? nullptr : read.driver_blob.data();
  VKF_VK_RETURN_IF_ERROR(vkCreatePipelineCache(device.handle(), &cache_info, nullptr, &store->cache_),
                         "vkCreatePipelineCache");
  return store;
}

PipelineStore::~PipelineStore() {
  for (auto& [key, pipeline] : pipelines_) vkDestroyPipeline(device_.handle(), pipeline, nullptr);
  if (cache_ != VK_NULL_HANDLE) vkDestroyPipelineCache(device_.handle(), cache_, nullptr);
}

size_t PipelineStore::pipeline_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pipelines_.size();
}

Result<VkPipeline> PipelineStore::Get(const ShaderBlob& shader, VkPipelineLayout layout,
                                      std::span<const uint32_t> spec_values) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto digest = digests_.find(shader.words);
  if (digest == digests_.end()) {
    digest = digests_.emplace(shader.words, Fnv1a64(shader.words, shader.word_count * sizeof(uint32_t))).first;
  }
  Key key{digest->second, std::vector<uint32_t>(spec_values.begin(), spec_values.end())};
  if (auto found = pipelines_.find(key); found != pipelines_.end()) return found->second;

  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = shader.word_count * sizeof(uint32_t);
  module_info.pCode = shader.words;
  VkShaderModule module = VK_NULL_HANDLE;
  VKF_VK_RETURN_IF_ERROR(vkCreateShaderModule(device_.handle(), &module_info, nullptr, &module),
                         "vkCreateShaderModule");

  std::vector<VkSpecializationMapEntry> entries(spec_values.size());
  for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * uint32_t(sizeof(uint32_t)), sizeof(uint32_t)};
  VkSpecializationInfo specialization{};
  specialization.mapEntryCount = uint32_t(entries.size());
  specialization.pMapEntries = entries.data();
  specialization.dataSize = spec_values.size() * sizeof(uint32_t);
  specialization.pData = spec_values.data();

  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &specialization;
  info.layout = layout;
  if (device_.pipeline_statistics()) info.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkPipeline pipeline = VK_NULL_HANDLE;
  const VkResult result = vkCreateComputePipelines(device_.handle(), cache_, 1, &info, nullptr, &pipeline);
  vkDestroyShaderModule(device_.handle(), module, nullptr);
  VKF_RETURN_IF_ERROR(VkCheck(result, (std::string("vkCreateComputePipelines(") + shader.name + ")").c_str()));
  if (device_.pipeline_statistics()) {
    std::string label = shader.name;
    for (size_t i = 0; i < spec_values.size(); ++i) label += (i ? "," : " [") + std::to_string(spec_values[i]);
    PrintPipelineStatistics(device_.handle(), pipeline, label + "]");
  }
  pipelines_.emplace(std::move(key), pipeline);
  return pipeline;
}

Status PipelineStore::Save(const std::string& path) const {
  if (path.empty()) return Status::Error(ErrorCode::kInvalidArgument, "no pipeline cache path to save to");
  size_t bytes = 0;
  VKF_VK_RETURN_IF_ERROR(vkGetPipelineCacheData(device_.handle(), cache_, &bytes, nullptr), "vkGetPipelineCacheData");
  std::vector<uint8_t> blob(bytes);
  VKF_VK_RETURN_IF_ERROR(vkGetPipelineCacheData(device_.handle(), cache_, &bytes, blob.data()),
                         "vkGetPipelineCacheData");
  blob.resize(bytes);
  return WritePipelineCacheFile(path, info_, blob);
}

}  // namespace vkflash::vk
