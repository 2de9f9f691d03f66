#include "attention/chunk_plan.h"

#include <algorithm>
#include <string>

#include "util/ceil_div.h"

namespace vkflash::attention {

bool OneStepFits(const DeviceInfo& device, const LoopCost& cost) {
  return device.shader_loop_budget == 0 || cost.fixed + cost.per_step <= device.shader_loop_budget / 2;
}

Result<ChunkPlan> PlanChunks(const DeviceInfo& device, const LoopCost& cost, uint64_t steps, uint32_t step_length) {
  ChunkPlan plan;
  plan.length = uint32_t(std::min<uint64_t>(steps * step_length, UINT32_MAX));
  const uint64_t budget = device.shader_loop_budget / 2;
  if (device.shader_loop_budget == 0 || cost.fixed + steps * cost.per_step <= budget) return plan;
  if (!OneStepFits(device, cost)) {
    return Status::Error(ErrorCode::kUnsupported,
                         "this driver ends shader loops after " + std::to_string(device.shader_loop_budget) +
                             " iterations; one step of the kernel needs more than half of that (chunks keep half "
                             "the budget in reserve)");
  }
  const uint64_t steps_per_chunk = (budget - cost.fixed) / cost.per_step;
  plan.chunks = uint32_t(CeilDiv(steps, steps_per_chunk));
  plan.length = uint32_t(steps_per_chunk * step_length);
  return plan;
}

}  // namespace vkflash::attention
