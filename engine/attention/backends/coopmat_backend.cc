#include "attention/backends/coopmat_backend.h"

#include <cstdio>
#include <optional>
#include <span>
#include <string>

#include "attention/backends/tile_search.h"
#include "common/shared_memory_sizes.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
namespace {

// Forward: subgroups per workgroup, 16-row blocks per subgroup, keys per tile, and the largest head
// dim the entry is for (longer key tiles cost registers beside O: 80 keys ran slower than 64 at
// D = 128); the first that fits (shared memory, the registers' bound below) runs.
// Measured on the H100 with `vkflash bench`, ratios against the tile the entry displaced
// (docs/tuning-log.md, "Tile tables of the tensor-core kernels" and "the subgroup-scope forward's
// key tiles"). The two extensions' kernels differ in how P becomes an A operand, and so in how
// long a key tile pays.
struct ForwardTile {
  uint32_t subgroups, m_blocks, block_kv, max_head_dim = 256;
};
constexpr ForwardTile kKhrForwardTiles[] = {
    {4, 1, 128, 64},  // D = 64: 1.25x the 64-key tile
    {4, 1, 96, 80},   // D = 80: 1.06x the 64-key tile; D = 64 at 32 KB: 1.12x
    {4, 1, 64},       // D = 128: 80 keys ran 0.9x
    {4, 1, 48},       // D = 128 at 32 KB: 1.18x the 32-key tile
    {4, 1, 32},       // D = 256
    {2, 1, 32},       // devices with 64 lanes a subgroup and 128 invocations a workgroup
    {4, 2, 16},       // D = 128 at 16 KB: 1.08x one subgroup's 16 rows
    {1, 1, 16},       // the smallest
};
constexpr ForwardTile kNvForwardTiles[] = {
    {4, 1, 48, 64},  // D = 64: 1.08x the 64-key tile (96 and 128 keys ran 0.93x and 0.96x)
    {4, 1, 64},      // D = 128: 48 keys ran 0.94x
    {4, 1, 48},      // D = 128 at 32 KB: 1.11x the 32-key tile
    {4, 1, 32},      // D = 256
    {2, 1, 32},      // devices with 64 lanes a subgroup and 128 invocations a workgroup
    {4, 2, 16},      // D = 128 at 16 KB: 1.08x one subgroup's 16 rows
    {1, 1, 16},      // the smallest
};

// The KHR tables (forward and backward) were measured with the element copy; kernels that convert
// P otherwise (the NV ones: the driver; KHR ones elsewhere: the scratch) take the NV tables.
bool TakesKhrTables(const DeviceInfo& device) {
  return device.cooperative_matrix == CooperativeMatrixApi::kKhr && device.cooperative_matrix_a_copy;
}

std::span<const ForwardTile> ForwardTiles(const DeviceInfo& device) {
  return TakesKhrTables(device) ? std::span<const ForwardTile>(kKhrForwardTiles)
                                : std::span<const ForwardTile>(kNvForwardTiles);
}

// Backward: subgroups (each owns 16 rows), rows per streamed tile and the largest head dim the
// entry is for; preferred first. Ratios: backward TFLOP/s against the entry displaced, H100
// (docs/tuning-log.md, "the subgroup-scope forward's key tiles, per extension"), and H200 since
// the row blocks pass through a scratch ("row blocks through a scratch").
struct BackwardTile {
  uint32_t subgroups, streamed, max_head_dim = 256;
};
constexpr BackwardTile kKhrDkdvTiles[] = {
    {4, 64, 64},  // D = 64: 1.08x 32 streamed rows (H200)
    {4, 32}, {4, 16},
    {1, 16},  // D = 128 at 32 KB: 1.16x {2, 32} (H200, since the scratch)
    {2, 32}, {2, 16},
};
constexpr BackwardTile kNvDkdvTiles[] = {
    {4, 64, 64},  // D = 64: 1.035x 32 streamed rows (KHR: 1.004x); H200 since the scratch 1.10x
    {4, 32}, {4, 16}, {2, 32}, {2, 16}, {1, 16},
};
constexpr BackwardTile kKhrDqTiles[] = {
    {4, 64},  // 1.05x 32 streamed keys at D = 64 (H100); since the scratch 1.04x at D = 128 (H200)
    {4, 32}, {2, 32}, {1, 16},
};
constexpr BackwardTile kNvDqTiles[] = {
    {4, 32, 64},  // D = 64: 1.02x 64 streamed keys (H200, since the scratch)
    {4, 64},      // D = 128: 1.024x 32 streamed keys (H100; H200 since the scratch 1.03x)
    {4, 32}, {2, 32}, {1, 16},
};

// Accumulator registers per lane grow with (row blocks x head dim): Q fragments and O in the
// forward; dK and dV (dkdv), or Q, dO and dQ (dq) in the backward. Past these, registers spill.
constexpr uint32_t kForwardMaxRowBlocksTimesDim = 256;
constexpr uint32_t kBackwardMaxHeadDim = 128;

// The coordinate matrix and the block scratch, a 16x16 float16 block per subgroup that row blocks
// pass through and, in the KHR kernels, accumulators on their way to A operands. Every kernel
// declares it whole, also where nothing uses it (the forward at head dims <= 64 with the element
// copy): sizing it by VKF_CM_A_LIKE_ACC gave wrong results on the H100's driver (docs/tuning-log.md,
// "A operands by an element copy").
uint32_t ScratchBytes(uint32_t subgroups) {
  return 4 * VKF_SMEM_CM_COORD_FLOATS + 16 * VKF_SMEM_CM_BLOCK_SCRATCH_U4(subgroups);
}

// The tile overrides.coopmat_forward names (SxMxK), if any.
std::optional<ForwardTile> ForcedForwardTile(const TileOverrides& overrides) {
  ForwardTile t{};
  const std::string& text = overrides.coopmat_forward;
  if (!text.empty() && std::sscanf(text.c_str(), "%ux%ux%u", &t.subgroups, &t.m_blocks, &t.block_kv) == 3 &&
      t.subgroups > 0 && t.m_blocks > 0 && t.block_kv > 0 && t.block_kv % 16 == 0) {
    return t;
  }
  return std::nullopt;
}

// The kernel choice of the subgroup-scope (NV or KHR) kernels...
KernelChoice Choice(const DeviceInfo& device, const std::string& base, uint32_t block_q, uint32_t block_kv,
                    uint32_t subgroups, uint32_t shared_bytes) {
  KernelChoice choice;
  choice.kernel = base + (device.cooperative_matrix == CooperativeMatrixApi::kKhr ? "_coopmat_khr" : "_coopmat_nv");
  choice.block_q = block_q;
  choice.block_kv = block_kv;
  choice.workgroup_size = subgroups * device.subgroup_size;
  choice.subgroup_reductions = true;
  choice.shared_memory_bytes = shared_bytes;
  choice.cooperative_matrix = device.cooperative_matrix;
  choice.subgroup_size = device.subgroup_size;
  return choice;
}

constexpr std::string_view kNvVariant = "coopmat_nv", kKhrVariant = "coopmat_khr";
constexpr std::string_view kVariants[] = {kKhrVariant, kNvVariant};  // preferred first (Use)

// The kernels reduce rows with subgroup shuffles; the layout probe is built with them.
bool Runs(const DeviceInfo& device, CooperativeMatrixApi api) {
  if (!device.use_subgroup_ops) return false;
  return api == CooperativeMatrixApi::kNv ? device.nv_cooperative_matrix_f16 && vk::FindShader("coopmat_probe_nv")
                                          : device.khr_cooperative_matrix_f16 && vk::FindShader("coopmat_probe_khr");
}

}  // namespace

std::span<const std::string_view> CoopmatBackend::variants() const { return kVariants; }

std::string CoopmatBackend::WhyUnusable(const DeviceInfo& device, std::string_view variant) const {
  if (variant == kNvVariant) {
    if (Runs(device, CooperativeMatrixApi::kNv)) return "";
    return device.nv_cooperative_matrix_f16 && !device.use_subgroup_ops
               ? "VK_NV_cooperative_matrix kernels need subgroup operations"
               : "VK_NV_cooperative_matrix kernels cannot run";
  }
  if (variant == kKhrVariant) {
    if (Runs(device, CooperativeMatrixApi::kKhr)) return "";
    return !device.khr_cooperative_matrix_f16 ? "VK_KHR_cooperative_matrix kernels cannot run"
           : !device.use_subgroup_ops         ? "VK_KHR_cooperative_matrix kernels need subgroup operations"
                                              : "this build has no VK_KHR_cooperative_matrix kernels (glslang >= 13 needed)";
  }
  if (Runs(device, CooperativeMatrixApi::kNv) || Runs(device, CooperativeMatrixApi::kKhr)) return "";
  return "neither VK_NV_ nor VK_KHR_cooperative_matrix kernels can run";
}

// KHR first where both run: on the H100 its kernels run 1.3x (forward) and 1.15x (backward) the NV
// ones, whose A operands the driver converts itself (docs/tuning-log.md, "A operands by an element
// copy"). Where the layout probe then finds no element copy, the Context switches to NV.
void CoopmatBackend::Use(DeviceInfo* device, std::string_view variant) const {
  const bool khr = variant == kKhrVariant || (variant.empty() && Runs(*device, CooperativeMatrixApi::kKhr));
  device->cooperative_matrix = khr ? CooperativeMatrixApi::kKhr : CooperativeMatrixApi::kNv;
}

bool CoopmatBackend::Applies(const DeviceInfo& device, const AttentionParams& params) const {
  return device.cooperative_matrix != CooperativeMatrixApi::kNone && params.dtype == DataType::kFloat16 &&
         params.shape.head_dim % 16 == 0 && params.shape.head_dim <= 256;
}

uint32_t CoopmatForwardSharedBytes(uint32_t head_dim, uint32_t block_kv, uint32_t subgroups) {
  return 16 * VKF_SMEM_ROW_PAIR_U4(block_kv, VKF_TILE_STRIDE(VKF_ROW_U4(head_dim))) +
         4 * VKF_SMEM_NONFINITE_FLAG_UINTS + ScratchBytes(subgroups);
}

uint32_t CoopmatBackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, uint32_t subgroups,
                                    bool dkdv) {
  const uint32_t stride = VKF_TILE_STRIDE(VKF_ROW_U4(head_dim));
  const uint32_t rows_u4 = dkdv ? VKF_SMEM_DKDV_TILES_U4(owned, VKF_SMEM_DKDV_STREAM_ROWS(streamed, owned), stride)
                                : VKF_SMEM_ROW_PAIR_U4(streamed, stride);
  const uint32_t row_floats = dkdv ? 2 * VKF_SMEM_ROW_FLOATS(streamed) : 0;  // the tile's LSE and delta
  const uint32_t nonfinite_uints = VKF_SMEM_NONFINITE_STEPS(streamed) + (dkdv ? VKF_SMEM_NONFINITE_FLAG_UINTS : 0);
  return 16 * rows_u4 + 4 * (row_floats + nonfinite_uints) + ScratchBytes(subgroups);
}

Result<KernelChoice> CoopmatBackend::ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                                   const TileOverrides& overrides) const {
  const uint32_t head_dim = params.shape.head_dim;
  auto bytes = [&](const ForwardTile& tile) {
    return CoopmatForwardSharedBytes(head_dim, tile.block_kv, tile.subgroups);
  };
  auto fits = [&](const ForwardTile& tile) {  // a forced tile's max_head_dim is 256: any head dim
    return head_dim <= tile.max_head_dim && tile.m_blocks * head_dim <= kForwardMaxRowBlocksTimesDim &&
           tile.subgroups * device.subgroup_size <= device.max_workgroup_invocations &&
           bytes(tile) <= device.usable_shared_memory_bytes;
  };
  const std::optional<ForwardTile> chosen =
      FirstTileThatFits(ForcedForwardTile(overrides), ForwardTiles(device), fits);
  if (!chosen) return NoTensorCoreTile(params);
  return Choice(device, "forward_f16", 16 * chosen->m_blocks * chosen->subgroups, chosen->block_kv, chosen->subgroups,
                bytes(*chosen));
}

Result<BackwardKernelChoice> CoopmatBackend::ChooseBackward(const DeviceInfo& device, const AttentionParams& params,
                                                           const TileOverrides&) const {
  const uint32_t head_dim = params.shape.head_dim;
  if (head_dim > kBackwardMaxHeadDim) return NoTensorCoreTile(params);
  auto choose = [&](bool dkdv) -> Result<KernelChoice> {
    auto bytes = [&](const BackwardTile& tile) {
      return CoopmatBackwardSharedBytes(head_dim, 16 * tile.subgroups, tile.streamed, tile.subgroups, dkdv);
    };
    auto fits = [&](const BackwardTile& tile) {
      return head_dim <= tile.max_head_dim &&
             tile.subgroups * device.subgroup_size <= device.max_workgroup_invocations &&
             bytes(tile) <= device.usable_shared_memory_bytes;
    };
    const bool khr = TakesKhrTables(device);
    const std::span<const BackwardTile> table =
        dkdv ? (khr ? std::span<const BackwardTile>(kKhrDkdvTiles) : std::span<const BackwardTile>(kNvDkdvTiles))
             : (khr ? std::span<const BackwardTile>(kKhrDqTiles) : std::span<const BackwardTile>(kNvDqTiles));
    const std::optional<BackwardTile> chosen = FirstTileThatFits(std::optional<BackwardTile>(), table, fits);
    if (!chosen) return NoTensorCoreTile(params);
    const uint32_t owned = 16 * chosen->subgroups;  // each subgroup owns 16 rows
    return dkdv ? Choice(device, "backward_dkdv_f16", chosen->streamed, owned, chosen->subgroups, bytes(*chosen))
                : Choice(device, "backward_dq_f16", owned, chosen->streamed, chosen->subgroups, bytes(*chosen));
  };
  return BothBackwardKernels(choose);
}

void CoopmatBackend::SetSpecConstants(const KernelChoice& choice, const CoopmatLayout& layout,
                                      SpecConstants* spec) const {
  (*spec)[VKF_SPEC_SUBGROUP_SIZE] = choice.subgroup_size;
  (*spec)[VKF_SPEC_CM_ROWS_PER_LANE] = layout.rows_per_lane;
  (*spec)[VKF_SPEC_CM_SLOTS_LO] = layout.slots_lo;
  (*spec)[VKF_SPEC_CM_SLOTS_HI] = layout.slots_hi;
  (*spec)[VKF_SPEC_CM_ROW_LANE_MASK] = layout.row_lane_mask;
  (*spec)[VKF_SPEC_CM_A_LIKE_ACC] = layout.a_like_accumulator ? 1 : 0;
}

}  // namespace vkflash::attention
