// The backward operator: checks a call, picks tiles, and records the preprocess dispatch, one
// barrier, and the dK/dV and dQ dispatches; with atomic dQ (BackwardKernelChoice::atomic_dq), the
// dK/dV dispatch, a barrier, and the dispatch that stores dQ from its sums; with stored dS
// (::stored_ds), per chunk the dK/dV dispatch that stores dS^T, a barrier and the dQ dispatch (see
// Context::RecordBackward for the contract).
#pragma once

#include <vkflash/device_info.hpp>

#include <memory>

#include "attention/call_layout.h"
#include "attention/coopmat_layout.h"
#include "attention/chunk_plan.h"
#include "attention/kernel_choice.h"
#include "attention/mask_tiles_op.h"
#include "common/shader_interface.h"
#include "vulkan/device.h"
#include "vulkan/kernel_layout.h"
#include "vulkan/pipeline_store.h"

namespace vkflash::attention {

class BackwardOperator {
 public:
  // `overrides`: the tuning tiles its kernel choice tries first (the context owns them).
  static Result<std::unique_ptr<BackwardOperator>> Create(const vk::Device& device, const DeviceInfo& info,
                                                          const TileOverrides& overrides, const CoopmatLayout& layout,
                                                          vk::PipelineStore& pipelines);

  // buffers.workspace must be set (WorkspaceBytes).
  Status Record(VkCommandBuffer cmd, const AttentionParams& params, const BackwardBuffers& buffers);
  void Forget(VkBuffer buffer) {
    layout_->Forget(buffer);
    mask_tiles_->Forget(buffer);
  }
  Result<uint64_t> WorkspaceBytes(const AttentionParams& params) const;
  // The kernels and tiles Record runs `params` with (given views they can vector-load).
  Result<BackwardKernelChoice> Choose(const AttentionParams& params) const;

  // How each gradient kernel's loop is split into dispatches (one chunk unless the driver has a
  // loop budget): dK/dV in steps (query tiles of a head), dQ in keys, dbias in steps of its walk.
  struct Plans {
    ChunkPlan dkdv, dq, dbias;
    Status dbias_status;  // why the dbias kernel cannot run this call (its walk too long), if so
  };

 private:
  BackwardOperator(const DeviceInfo& info, const TileOverrides& overrides, const CoopmatLayout& layout,
                   vk::PipelineStore& pipelines)
      : info_(info), overrides_(overrides), coopmat_layout_(layout), pipelines_(pipelines) {}
  Result<Plans> ChunkPlans(const BackwardKernelChoice& choice, const CallLayout& call) const;
  // zero_dq_sums: the preprocess also zeroes the dQ sums (atomic dQ).
  Result<VkPipeline> Pipeline(const KernelChoice& choice, const AttentionParams& params, bool chunked,
                              bool zero_dq_sums = false);
  // Stored dS (BackwardKernelChoice::stored_ds): per chunk of (batch, KV head) pairs, the dK/dV
  // dispatch that stores the chunk's dS^T, a barrier, and the dQ dispatch that reads it back, with a
  // barrier before the next chunk overwrites the slots.
  void RecordStoredDs(VkCommandBuffer cmd, gpu::AttentionPush push, const AttentionShape& shape,
                      VkPipeline dkdv_pipeline, VkPipeline dq_pipeline, uint32_t groups_dkdv, uint32_t groups_dq);
  // One dispatch per chunk of `plan` (a loop of `loop_end` keys or steps), with barriers between.
  void DispatchChunks(VkCommandBuffer cmd, gpu::AttentionPush push, const ChunkPlan& plan, uint32_t loop_end,
                      uint32_t groups_x, uint32_t groups_y, uint32_t groups_z);

  const DeviceInfo& info_;
  const TileOverrides& overrides_;
  const CoopmatLayout& coopmat_layout_;
  vk::PipelineStore& pipelines_;
  std::unique_ptr<vk::KernelLayout> layout_;
  std::unique_ptr<MaskTilesOperator> mask_tiles_;  // the mask's block summary, before the kernels
};

}  // namespace vkflash::attention
