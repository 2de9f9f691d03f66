// How a device spreads a 16x16 float32 cooperative-matrix accumulator over a subgroup's lanes,
// learned at start-up by shaders/coopmat/coopmat_layout_probe.comp. The tensor-core kernels run their
// softmax on accumulators in registers and need its structure (see shaders/coopmat/coopmat.glsl):
//   - every lane holds the same number of elements, E <= 16, covering R distinct rows;
//   - element i of every lane belongs to the lane's row number slot(i) (the same function of i
//     for all lanes);
//   - the lanes holding one row are exactly {l ^ m : m within a lane mask}, and between them
//     they hold the row's 16 columns once each.
// A device whose layout breaks this runs the scalar kernels.
#pragma once

#include <vkflash/device_info.hpp>

#include <vector>

#include "vulkan/command_runner.h"
#include "vulkan/device.h"
#include "vulkan/pipeline_store.h"

namespace vkflash::attention {

struct CoopmatLayout {
  uint32_t subgroup_size = 0;
  uint32_t elements_per_lane = 0;
  uint32_t rows_per_lane = 0;  // R
  uint32_t slots_lo = 0;       // slot of elements 0..7, 4 bits each
  uint32_t slots_hi = 0;       // elements 8..15
  uint32_t row_lane_mask = 0;
  // A float16 A operand holds element i of every lane at the accumulator's row and column: an
  // accumulator becomes an A operand by an element copy (VKF_SPEC_CM_A_LIKE_ACC).
  bool a_like_accumulator = false;
};

// Checks the probe's output (VKF_PROBE_STRIDE floats per lane: the value 16 * row + column of each
// element, the element count last; then the same for the A operand, if the output holds it) and
// derives the layout; kUnsupported with the reason if the accumulator's structure above does not
// hold. An A operand laid out otherwise, or missing, only leaves a_like_accumulator false.
Result<CoopmatLayout> AnalyzeCoopmatProbe(const std::vector<float>& probe, uint32_t subgroup_size);

// Runs the probe for `api` on the device and analyzes it.
Result<CoopmatLayout> ProbeCoopmatLayout(const vk::Device& device, vk::CommandRunner& runner,
                                         vk::PipelineStore& pipelines, CooperativeMatrixApi api,
                                         uint32_t subgroup_size);

}  // namespace vkflash::attention
