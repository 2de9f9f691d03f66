// Some drivers end every loop of a shader invocation after a fixed number of iterations in all,
// silently (lavapipe of Mesa 22.3, Debian bookworm's: 65535, shared by all loops; Mesa 25.0 has
// none): a kernel that walks a long sequence in one workgroup would return a wrong answer.
// vkflash measures the budget when a Context starts (shaders/probes/loop_budget_probe.comp) and, where
// there is one, runs its scalar kernels in chunks that each stay well inside it (chunk_plan.h).
#pragma once

#include <vkflash/device_info.hpp>

#include "vulkan/command_runner.h"
#include "vulkan/device.h"
#include "vulkan/pipeline_store.h"

namespace vkflash::attention {

// The iterations one invocation ran of a loop asked for VKF_LOOP_PROBE_ITERATIONS: that budget, or
// 0 when the loop ran to the end (no budget below that many iterations).
Result<uint32_t> ProbeLoopBudget(const vk::Device& device, vk::CommandRunner& runner, vk::PipelineStore& pipelines);

}  // namespace vkflash::attention
