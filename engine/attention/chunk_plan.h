// Chunked passes for drivers with a loop budget (loop_budget.h): how many loop iterations one
// invocation of a kernel runs, and how its loop is split into dispatches that each stay inside
// half of the budget.
#pragma once

#include <vkflash/device_info.hpp>

namespace vkflash::attention {

// Every loop of a kernel's source counted at its longest, as though the compiler unrolled none.
// `fixed` is run once per dispatch, `per_step` for each streamed tile (forward and dQ: a key tile;
// dK/dV: a query tile of one head).
struct LoopCost {
  uint64_t fixed = 0, per_step = 0;
};

// `chunks` of `length` each (keys for the forward and dQ, a multiple of the key tile; steps for
// dK/dV), the last one shorter. One chunk (the whole loop) where the device has no loop budget or
// the loop fits in half of it; a chunk takes at most half of the budget, the other half being
// margin for what LoopCost misses.
struct ChunkPlan {
  uint32_t chunks = 1;
  uint32_t length = 0;
};
// Whether one step (and the fixed part) fits a chunk: always where the device has no loop budget.
// Tile choices take a tile only where it does, so that PlanChunks can split its loop.
bool OneStepFits(const DeviceInfo& device, const LoopCost& cost);
// kUnsupported when not even one step fits.
Result<ChunkPlan> PlanChunks(const DeviceInfo& device, const LoopCost& cost, uint64_t steps, uint32_t step_length);

}  // namespace vkflash::attention
