// GPU time of recorded work, from timestamp queries: for benchmarks (median of many runs), never
// for tests.
#pragma once

#include <vkflash/device_info.hpp>

#include <functional>
#include <vector>

#include "vulkan/command_runner.h"
#include "vulkan/device.h"

namespace vkflash::vk {

// Records `record` `runs` times into one submission, each run between a top-of-pipe and a
// bottom-of-pipe timestamp and followed by a full barrier (runs never overlap), then returns each
// run's time in milliseconds. kUnsupported if the queue has no timestamps.
Result<std::vector<double>> TimeOnGpu(const Device& device, const DeviceInfo& info, CommandRunner& runner,
                                      const std::function<Status(VkCommandBuffer)>& record, uint32_t runs);

}  // namespace vkflash::vk
