#include "attention/mask_tiles_op.h"

#include <algorithm>
#include <array>

#include "attention/kernel_constants.h"
#include "common/shader_interface.h"
#include "util/ceil_div.h"
#include "util/status_macros.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
namespace {

// The summary's geometry (as mask_tile_rows / mask_tile_words in shaders/common/mask_elements.glsl).
struct SummaryGrid {
  uint64_t words_per_row = 0, block_rows = 0, heads = 0;
  uint64_t words() const { return words_per_row * block_rows * heads; }
};
SummaryGrid GridOf(const CallLayout& call) {
  const MaskShape& mask = call.mask;
  if (call.planning.mask.type == MaskType::kNone || mask.elements() == 0) return {};
  SummaryGrid grid;
  grid.words_per_row = CeilDiv(CeilDiv(mask.mask_keys(), VKF_MASK_TILE_KEYS), 32);
  grid.block_rows = CeilDiv(mask.mask_rows(), VKF_MASK_TILE_ROWS);
  grid.heads = uint64_t(mask.mask_batch()) * mask.mask_heads();
  return grid;
}

}  // namespace

Result<std::unique_ptr<MaskTilesOperator>> MaskTilesOperator::Create(const vk::Device& device, const DeviceInfo& info,
                                                                     vk::PipelineStore& pipelines) {
  auto op = std::unique_ptr<MaskTilesOperator>(new MaskTilesOperator(info, pipelines));
  VKF_ASSIGN_OR_RETURN(op->layout_, vk::KernelLayout::Create(device, VKF_MASK_TILES_BINDING_COUNT,
                                                             sizeof(gpu::MaskTilesPush)));
  return op;
}

uint64_t MaskTilesOperator::SummaryBytes(const CallLayout& call) { return GridOf(call).words() * sizeof(uint32_t); }

Status MaskTilesOperator::Record(VkCommandBuffer cmd, const CallLayout& call, const BufferView& mask,
                                 const BufferView& summary) {
  const SummaryGrid grid = GridOf(call);
  if (grid.words() == 0) return Status::Ok();
  // 128 invocations run everywhere (Vulkan's minimum); the heads go in several dispatches where
  // they exceed the z count, as the attention kernels' batch x heads does not.
  if (grid.words_per_row > info_.max_workgroup_count[0] || grid.block_rows > info_.max_workgroup_count[1]) {
    return Status::Error(ErrorCode::kUnsupported, "the mask's keys / rows exceed maxComputeWorkGroupCount");
  }
  const vk::ShaderBlob* shader = vk::FindShader("mask_tiles");
  if (shader == nullptr) return Status::Error(ErrorCode::kUnsupported, "the mask summary's kernel is not built");
  SpecConstants spec{};
  spec[VKF_SPEC_MASK] = uint32_t(call.planning.mask.type);
  spec[VKF_SPEC_MASK_DIMS] = call.mask.dims;
  VKF_ASSIGN_OR_RETURN(VkPipeline pipeline, pipelines_.Get(*shader, layout_->pipeline_layout(), spec));

  std::array<BufferView, VKF_MASK_TILES_BINDING_COUNT> bindings;
  bindings[VKF_MASK_TILES_BINDING_MASK] = mask;
  bindings[VKF_MASK_TILES_BINDING_SUMMARY] = summary;
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  VKF_RETURN_IF_ERROR(layout_->BindBuffers(cmd, bindings));
  const uint64_t heads_per_dispatch = info_.max_workgroup_count[2];
  for (uint64_t head0 = 0; head0 < grid.heads; head0 += heads_per_dispatch) {
    const gpu::MaskTilesPush push{call.mask.mask_rows(), call.mask.mask_keys(), uint32_t(head0)};
    vkCmdPushConstants(cmd, layout_->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    vkCmdDispatch(cmd, uint32_t(grid.words_per_row), uint32_t(grid.block_rows),
                  uint32_t(std::min(heads_per_dispatch, grid.heads - head0)));
  }
  return Status::Ok();
}

}  // namespace vkflash::attention
