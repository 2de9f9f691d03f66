#include "vulkan/pipeline_statistics.h"

#include <cstdio>
#include <vector>

namespace vkflash::vk {

void PrintPipelineStatistics(VkDevice device, VkPipeline pipeline, const std::string& label) {
  auto get_properties = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutablePropertiesKHR"));
  auto get_statistics = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutableStatisticsKHR"));
  if (get_properties == nullptr || get_statistics == nullptr) return;
  VkPipelineInfoKHR pipeline_info{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pipeline_info.pipeline = pipeline;
  uint32_t executables = 0;
  if (get_properties(device, &pipeline_info, &executables, nullptr) != VK_SUCCESS) return;
  for (uint32_t e = 0; e < executables; ++e) {
    VkPipelineExecutableInfoKHR executable{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    executable.pipeline = pipeline;
    executable.executableIndex = e;
    uint32_t count = 0;
    if (get_statistics(device, &executable, &count, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> stats(count, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    if (get_statistics(device, &executable, &count, stats.data()) < 0) continue;
    std::string line = "vkflash: pipeline statistics " + label + ":";
    for (const auto& s : stats) {
      line += std::string(" ") + s.name + "=";
      switch (s.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: line += s.value.b32 ? "true" : "false"; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: line += std::to_string(s.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: line += std::to_string(s.value.u64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: line += std::to_string(s.value.f64); break;
        default: line += "?";
      }
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace vkflash::vk
