// The subgroup-scope cooperative-matrix family (VK_NV_cooperative_matrix or
// VK_KHR_cooperative_matrix; shaders/coopmat/): every tile a whole number of 16x16 blocks, a
// subgroup owning 16-row blocks of the output with their accumulators in registers, rows reduced
// with subgroup shuffles in the accumulator layout the Context probed (coopmat_layout.h).
#pragma once

#include "attention/backends/kernel_backend.h"

namespace vkflash::attention {

class CoopmatBackend final : public KernelBackend {
 public:
  const char* name() const override { return "coopmat"; }
  // "coopmat_khr", "coopmat_nv": the extension its kernels are built for; KHR first where both run.
  std::span<const std::string_view> variants() const override;
  std::string WhyUnusable(const DeviceInfo& device, std::string_view variant) const override;
  // DeviceInfo::cooperative_matrix.
  void Use(DeviceInfo* device, std::string_view variant) const override;
  void Unuse(DeviceInfo* device) const override { device->cooperative_matrix = CooperativeMatrixApi::kNone; }
  bool Used(const DeviceInfo& device) const override {
    return device.cooperative_matrix != CooperativeMatrixApi::kNone;
  }
  bool uses_tensor_cores() const override { return true; }
  // The Context chose NV or KHR (DeviceInfo::cooperative_matrix), float16 tensors, head dim a
  // multiple of 16 up to 256 (ChooseBackward: up to 128).
  bool Applies(const DeviceInfo& device, const AttentionParams& params) const override;
  // The forward tables (one per extension) can be replaced for tuning: ContextOptions::
  // tile_overrides.coopmat_forward (SxMxK: subgroups x 16-row blocks per subgroup x keys per tile) is
  // tried first.
  Result<KernelChoice> ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                     const TileOverrides& overrides) const override;
  Result<BackwardKernelChoice> ChooseBackward(const DeviceInfo& device, const AttentionParams& params,
                                              const TileOverrides& overrides) const override;
  // Their subgroup size and the accumulator layout.
  void SetSpecConstants(const KernelChoice& choice, const CoopmatLayout& layout, SpecConstants* spec) const override;
};

// Shared memory of the forward: K and V tiles with padded rows, the non-finite flag, the
// coordinate matrix, and the per-subgroup block scratch (row blocks; KHR: accumulators to A operands).
uint32_t CoopmatForwardSharedBytes(uint32_t head_dim, uint32_t block_kv, uint32_t subgroups);

// Shared memory of the gradient kernels: dK/dV its `owned` V rows and a region that holds its K rows
// once, then each step's Q and dO tiles of `streamed` rows; dQ two streamed tiles (K and V); the
// streamed rows' non-finite steps, per-row LSE and delta and the non-finite flag (dK/dV), the
// scratch as in the forward.
uint32_t CoopmatBackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, uint32_t subgroups,
                                    bool dkdv);

}  // namespace vkflash::attention
