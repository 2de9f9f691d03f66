// The forward operator: checks a call, picks the kernel variant and tiles, and records its
// dispatches. No barriers around them are recorded here (see Context::RecordForward for the contract).
#pragma once

#include <vkflash/device_info.hpp>

#include <array>
#include <memory>

#include "attention/call_layout.h"
#include "attention/coopmat_layout.h"
#include "attention/chunk_plan.h"
#include "attention/kernel_choice.h"
#include "attention/kernel_constants.h"
#include "attention/mask_tiles_op.h"
#include "vulkan/device.h"
#include "vulkan/kernel_layout.h"
#include "vulkan/pipeline_store.h"

namespace vkflash::attention {

class ForwardOperator {
 public:
  // `layout` is read at every Record (the context owns it; valid when the device runs tensor cores).
  // `overrides`: the tuning tiles its kernel choice tries first (the context owns them).
  static Result<std::unique_ptr<ForwardOperator>> Create(const vk::Device& device, const DeviceInfo& info,
                                                         const TileOverrides& overrides, const CoopmatLayout& layout,
                                                         vk::PipelineStore& pipelines);

  // A non-empty `stats` runs the instrumented scalar kernel (diagnostics.hpp).
  Status Record(VkCommandBuffer cmd, const AttentionParams& params, const ForwardBuffers& buffers,
                const BufferView& stats = {});
  void Forget(VkBuffer buffer) {
    layout_->Forget(buffer);
    mask_tiles_->Forget(buffer);
  }
  // Bytes of ForwardBuffers::workspace that Record needs for `params` (0: none), with or without stats.
  Result<uint64_t> WorkspaceBytes(const AttentionParams& params, bool with_stats) const;
  // The kernel and tiles Record runs `params` with (given views it can vector-load).
  Result<KernelChoice> Choose(const AttentionParams& params) const;

 private:
  ForwardOperator(const DeviceInfo& info, const TileOverrides& overrides, const CoopmatLayout& layout,
                  vk::PipelineStore& pipelines)
      : info_(info), overrides_(overrides), coopmat_layout_(layout), pipelines_(pipelines) {}
  // How the key loop is split into dispatches (one chunk unless the driver has a loop budget).
  Result<ChunkPlan> Chunks(const KernelChoice& choice, const AttentionParams& params, bool instrumented) const;
  // The pipeline of `kernel` with the constants every kernel takes and (a family's choice) its
  // family's own; `mask_reads`: the decode kernels'.
  Result<VkPipeline> Pipeline(const KernelChoice& kernel, const AttentionParams& params, bool write_lse,
                              bool instrument, bool chunked, DecodeMaskReads mask_reads = {});
  // The decode family's split-K pass and, with several parts, their merge (decode_backend.h), with
  // the bindings and push constants Record made; `mask_reads`: how the kernel reads the mask,
  // which Record decided (DecodeReadsMaskSummary, DecodeMaskTermRows).
  Status RecordDecode(VkCommandBuffer cmd, const CallLayout& call, const KernelChoice& choice,
                      const std::array<BufferView, VKF_FWD_BINDING_COUNT>& bindings, const gpu::AttentionPush& push,
                      uint32_t splits, bool write_lse, DecodeMaskReads mask_reads);

  const DeviceInfo& info_;
  const TileOverrides& overrides_;
  const CoopmatLayout& coopmat_layout_;
  vk::PipelineStore& pipelines_;
  std::unique_ptr<vk::KernelLayout> layout_;
  std::unique_ptr<MaskTilesOperator> mask_tiles_;  // the mask's block summary, before the kernels
};

}  // namespace vkflash::attention
