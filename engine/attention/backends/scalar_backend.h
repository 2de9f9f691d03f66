// The scalar family: plain GLSL kernels for any Vulkan 1.1 device (shaders/scalar/). Rows are
// shared by `threads_per_row` invocations and reduced with subgroup shuffles where the device
// allows them, else through shared memory. The forward is register-tiled where the call's views
// allow 16-byte loads and the head dim is a multiple of 8 (float16 products where the device has
// shaderFloat16), else the per-row kernel runs it; so are the gradient kernels (float32 products). On a driver with a loop budget they run in chunks
// (chunk_plan.h), so they also say how many loop iterations they run.
#pragma once

#include "attention/backends/kernel_backend.h"
#include "attention/chunk_plan.h"

namespace vkflash::attention {

class ScalarBackend final : public KernelBackend {
 public:
  const char* name() const override { return "scalar"; }
  // Usable everywhere: nothing to record.
  std::span<const std::string_view> variants() const override;
  std::string WhyUnusable(const DeviceInfo&, std::string_view) const override { return ""; }
  void Use(DeviceInfo*, std::string_view) const override {}
  void Unuse(DeviceInfo*) const override {}
  bool Used(const DeviceInfo&) const override { return true; }
  // Long loops run in chunks (chunk_plan.h).
  bool runs_within_loop_budget() const override { return true; }
  bool Applies(const DeviceInfo&, const AttentionParams&) const override { return true; }
  Result<KernelChoice> ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                     const TileOverrides& overrides) const override;
  Result<BackwardKernelChoice> ChooseBackward(const DeviceInfo& device, const AttentionParams& params,
                                              const TileOverrides& overrides) const override;
};

// The per-row forward (scalar/attention_forward.comp), which takes every call: instrumented ones,
// views and strides the register-tiled kernel's 16-byte loads cannot take, any head dim.
Result<KernelChoice> ChoosePerRowForward(const DeviceInfo& device, const AttentionParams& params,
                                         const TileOverrides& overrides);

// Whether `choice` is the register-tiled forward (scalar/attention_forward_tiled.comp).
bool IsTiledForward(const KernelChoice& choice);

// The per-row gradient kernels (scalar/attention_backward_{dkdv,dq}.comp), which take every call:
// views and strides the register-tiled kernels' 16-byte loads cannot take, any head dim.
Result<BackwardKernelChoice> ChoosePerRowBackward(const DeviceInfo& device, const AttentionParams& params);

// Whether `choice` is a register-tiled gradient kernel (scalar/attention_backward_{dkdv,dq}_tiled.comp).
bool IsTiledBackward(const KernelChoice& choice);

// Shared memory a register-tiled gradient kernel declares: two owned and two streamed tensors
// (float16: words of 8 halves, else 4 floats), the step's scores (dK/dV: P^T, dS^T, and the
// step's LSE and delta; dQ: dS; laid out by the invocations' owned rows, rows_per_thread:
// scalar/score_tile.glsl).
uint32_t TiledBackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, uint32_t rows_per_thread,
                                  bool half_words, bool dkdv);

// Shared memory the register-tiled forward declares: Q, K and V words (float16 words: 8 halves,
// else 4 floats; K floats where float_k_tile), P, the shared-memory reductions' scratch, the
// float16 guards.
uint32_t TiledForwardSharedBytes(uint32_t head_dim, uint32_t block_q, uint32_t block_kv, uint32_t workgroup_size,
                                 bool float16_words, bool float_k_tile, bool subgroup_reductions);

// Shared memory the scalar forward kernel declares for these tiles (q and kv tiles with padded
// rows, the P tile, the shared-memory reductions' scratch).
uint32_t ForwardSharedBytes(uint32_t head_dim, uint32_t block_q, uint32_t block_kv, uint32_t threads_per_row,
                            bool subgroup_reductions);

// Shared memory of the scalar gradient kernels: `owned` rows stay in the workgroup, tiles of
// `streamed` rows pass through.
uint32_t BackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, bool dkdv);

// How many loop iterations one invocation of a scalar kernel runs, at most (chunk_plan.h).
LoopCost ScalarForwardLoopCost(const KernelChoice& choice, uint32_t head_dim, bool instrumented);
LoopCost TiledForwardLoopCost(const KernelChoice& choice, uint32_t head_dim);  // the register-tiled forward's
LoopCost ScalarDqLoopCost(const KernelChoice& choice, uint32_t head_dim);
LoopCost ScalarDkdvLoopCost(const KernelChoice& choice, uint32_t head_dim);

}  // namespace vkflash::attention
