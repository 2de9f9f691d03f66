// What the viewer computes and draws each frame, all on the GPU: live Q/K/V from a pattern,
// vkflash's real (instrumented) forward kernel, the attention matrix of the chosen head, and the
// canvas the panels are drawn into. Nothing is read back to the CPU.
#pragma once

#include <vkflash/diagnostics.hpp>

#include <memory>
#include <string>

#include "shaders/viewer_interface.h"
#include "viewer_device.h"

namespace viewer {

struct SceneSettings {
  uint32_t seq_len = 256, head_dim = 64, heads = 4, show_head = 0;
  vkflash::DataType dtype = vkflash::DataType::kFloat32;
  bool causal = true;
  float scale_factor = 1.0f;  // x 1/sqrt(D)
  uint32_t pattern = VIEWER_PATTERN_MIXED_HEADS;

  bool SameBuffers(const SceneSettings& o) const {
    return seq_len == o.seq_len && head_dim == o.head_dim && heads == o.heads && dtype == o.dtype;
  }
};

class AttentionScene {
 public:
  static std::unique_ptr<AttentionScene> Create(ViewerDevice& device, std::string* error);
  ~AttentionScene();

  // Applies settings; reallocates buffers when their sizes change (waits for the device).
  bool Configure(const SceneSettings& settings, std::string* error);
  bool ResizeCanvas(VkExtent2D extent, std::string* error);

  // Records the frame's compute work and leaves the canvas in TRANSFER_SRC layout.
  bool Record(VkCommandBuffer cmd, float time, CanvasPush layout, std::string* error);
  // Blits the canvas onto `target` (any layout before; COLOR_ATTACHMENT_OPTIMAL after).
  void BlitTo(VkCommandBuffer cmd, VkImage target);
  // The forward kernel's GPU time in the last completed frame (timestamps), or < 0 if unknown.
  double ForwardMilliseconds();

  const SceneSettings& settings() const { return settings_; }
  const vkflash::KernelChoice& choice() const { return choice_; }
  vkflash::AttentionParams params() const;
  uint32_t q_tiles() const { return (settings_.seq_len + choice_.block_q - 1) / choice_.block_q; }
  // Key tiles the kernel visits for Q tile `tq` (all, unless causal).
  uint32_t visited_tiles(uint32_t tq) const;

 private:
  struct Pipeline {
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};  // [float32, float16] (canvas: one)
    VkDescriptorSet set = VK_NULL_HANDLE;
  };
  explicit AttentionScene(ViewerDevice& device) : device_(device) {}
  bool MakePipeline(Pipeline* p, const VkDescriptorType* types, uint32_t count, uint32_t push_bytes,
                    const uint32_t* spirv_f32, size_t bytes_f32, const uint32_t* spirv_f16, size_t bytes_f16);
  void UpdateSets();

  ViewerDevice& device_;
  SceneSettings settings_;
  bool configured_ = false;
  vkflash::KernelChoice choice_;
  vkflash::Buffer q_, k_, v_, o_, lse_, stats_, p_, workspace_;
  Pipeline inputs_, probabilities_, canvas_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkImage canvas_image_ = VK_NULL_HANDLE;
  VkDeviceMemory canvas_memory_ = VK_NULL_HANDLE;
  VkImageView canvas_view_ = VK_NULL_HANDLE;
  VkExtent2D canvas_extent_{};
  VkQueryPool timestamps_ = VK_NULL_HANDLE;
  bool timestamps_written_ = false;
};

}  // namespace viewer
