// Kernel tuning aid: with ContextOptions::pipeline_statistics and a device that offers
// VK_KHR_pipeline_executable_properties, the driver's statistics of every pipeline vkflash
// creates (registers, spills, shared memory: whatever the driver reports) go to stderr.
#pragma once

#include <vulkan/vulkan.h>

#include <string>

namespace vkflash::vk {

// Prints one line per statistic of `pipeline`'s executables, labelled with `label`.
void PrintPipelineStatistics(VkDevice device, VkPipeline pipeline, const std::string& label);

}  // namespace vkflash::vk
