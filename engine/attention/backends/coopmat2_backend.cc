#include "attention/backends/coopmat2_backend.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <string>

#include "attention/backends/tile_search.h"
#include "attention/kernel_choice.h"
#include "common/shader_interface.h"
#include "common/shared_memory_sizes.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
namespace {

// The forward (workgroup-scope matrices): rows a workgroup owns, rows of each streamed tile,
// workgroup size, the largest head dim the tile is for (registers grow with it), and the fewest
// keys a query row must see on average (MeanVisibleKeys) for the tile to repay its longer prologue
// and epilogue; preferred first. The streamed K and V tiles are staged in shared memory, so a tile
// must also fit it (Coopmat2ForwardBytes). The order and the thresholds come from `vkflash bench`
// on the H100 (docs/tuning-log.md, "Tile tables of the tensor-core kernels").
struct WorkgroupTile {
  uint32_t owned, streamed, workgroup, max_head_dim;
  uint32_t min_mean_keys = 0;
  bool plain_scores_only = false;  // calls that modify scores per element take a later entry
};
// 128x64x256 from 4096 keys is for calls whose scores no mask, bias, softcap or ALiBi modifies
// element by element: with one, 64x64x128 (the next entry that fits on the H100) was faster at
// D = 128 for every kind of mask (docs/tuning-log.md, 2026-11-27 "the coopmat2 forward's tile with
// a mask") and on an H200 for a softcap (8-9% less time) and ALiBi (6-7%), where sinks alone
// took 1% longer on it (2026-11-29, "the coopmat2 tiles with a softcap or ALiBi"); untimed where
// 80-key steps fit, and at D = 96.
constexpr WorkgroupTile kCoopmat2ForwardTiles[] = {
    {128, 64, 128, 64},  {128, 64, 256, 128, 4096, true}, {64, 96, 128, 96, 1024}, {64, 80, 128, 128, 1024},
    {64, 64, 128, 128},  {128, 64, 256, 128},             {64, 32, 128, 256},      {128, 32, 256, 256},
    {32, 32, 128, 256}};

// The packed decode kernel (decode/attention_forward_decode_coopmat2.comp): the fewest owned rows
// that hold the packed rows first (the rest are zeros that cost tensor-core time), owned <= streamed
// (its shared tiles hold Q and O too); per owned size the longest streamed tile that fits, as the
// kernel is bound by the reads in flight (H100, docs/tuning-log.md): 32 rows is its row granularity
// at 128 invocations; 128 streamed rows fit its 48 KB of shared memory up to D = 64 (D = 64 B = 16
// Nq = 4 at 16k keys: 0.72 -> 0.87 of the read probe against 64), 32 only at D = 256.
constexpr WorkgroupTile kCoopmat2DecodeTiles[] = {
    {32, 128, 128, 64}, {32, 64, 128, 256}, {32, 32, 128, 256}, {64, 128, 128, 64}, {64, 64, 128, 128}};

// The backward kernels (subgroup-scope matrices of flexible size): subgroups per workgroup, the
// rows each owns (16 or 32: keys in dK/dV, queries in dQ), rows of each streamed tile, and the
// largest head dim the tile is for; preferred first (the same tuning-log entry). dK/dV keeps its V
// rows in shared memory and stages its K rows there once (Coopmat2BackwardBytes).
struct SubgroupTile {
  uint32_t subgroups, rows, streamed, max_head_dim;  // rows: owned rows per subgroup, 16 or 32
  bool without_softcap_only = false;                 // deterministic calls with a softcap take a later entry
};
// With a softcap (its P recomputed through the cap, its derivative taken from P) the deterministic
// D = 64 gradients took 6% less time with dQ on 16-row subgroups and dK/dV on 64-query steps, 10%
// with ALiBi and sinks too and 23-24% with causal besides, where the plain, ALiBi and masked calls
// took 14-15% more on those tiles (H200, docs/tuning-log.md, 2026-11-29 "the coopmat2 tiles with a
// softcap or ALiBi"). Atomic dQ's choice (AtomicDqPays) counts the dQ grid of the tile chosen.
constexpr SubgroupTile kCoopmat2DkdvTiles[] = {{4, 16, 128, 64, true}, {4, 16, 64, 64},  {4, 16, 48, 128},
                                               {4, 16, 32, 128},       {2, 16, 32, 128}, {1, 16, 16, 128}};
constexpr SubgroupTile kCoopmat2DqTiles[] = {{4, 32, 64, 64, true}, {4, 32, 32, 64, true}, {4, 16, 64, 128},
                                             {4, 16, 32, 128},      {2, 16, 32, 128},      {1, 16, 16, 128}};
// dQ from stored dS (deterministic = false): 32 owned rows per subgroup (no Q and dO operands are
// held), 64 streamed keys: the fastest of six tiles at D = 128 on the H100 (docs/tuning-log.md,
// "stored dS in the coopmat2 backward").
constexpr SubgroupTile kCoopmat2DqFromDsTiles[] = {{4, 32, 64, 128}, {4, 16, 64, 128}, {4, 16, 32, 256},
                                                  {2, 16, 32, 256}, {1, 16, 16, 256}};
// dK/dV with atomic dQ (deterministic = false): its shared memory also holds the step's dS^T
// (Coopmat2AtomicDqBytes), so the streamed tiles are shorter: the longest that fit 48 KB.
constexpr SubgroupTile kCoopmat2AtomicDqTiles[] = {
    {4, 16, 64, 64}, {4, 16, 32, 128}, {2, 16, 32, 128}, {1, 16, 16, 128}};

// Accumulator registers per lane grow with the head dim: past 128, the backward's spill.
constexpr uint32_t kBackwardMaxHeadDim = 128;

// Whether every matrix of the forward at `tile` is a multiple of the granularities `listed` gives
// for its workgroup size. Rows (Q, S, P, O, the row vectors) are M; keys are N of S and K of
// P x V and P x ones; the head dim is K of Q x K^T and N of O; the row vectors are
// `row_vector_columns` wide (N).
bool ForwardMatricesFit(const DeviceInfo::Coopmat2Workgroup& listed, const WorkgroupTile& tile, uint32_t head_dim,
                        uint32_t row_vector_columns) {
  const auto multiple = [](uint32_t size, uint32_t granularity) { return granularity > 0 && size % granularity == 0; };
  return listed.invocations == tile.workgroup && multiple(tile.owned, listed.m_granularity) &&
         multiple(tile.streamed, listed.n_granularity) && multiple(tile.streamed, listed.k_granularity) &&
         multiple(head_dim, listed.n_granularity) && multiple(head_dim, listed.k_granularity) &&
         multiple(row_vector_columns, listed.n_granularity);
}

// Shared memory of the VK_NV_cooperative_matrix2 kernels (the driver may add some of its own). K
// and V tiles of `streamed` padded rows (shaders/common/stage_rows.glsl), in bytes...
uint32_t Coopmat2KvTileBytes(uint32_t head_dim, uint32_t streamed) {
  return 16 * VKF_SMEM_ROW_PAIR_U4(streamed, VKF_TILE_STRIDE(VKF_ROW_U4(head_dim)));
}
// ...the packed decode kernel: those tiles (which hold Q before the loop and O after it), the rows'
// LSE, the non-finite flag and the mask's open tiles...
uint32_t Coopmat2DecodeBytes(uint32_t head_dim, const WorkgroupTile& tile) {
  return Coopmat2KvTileBytes(head_dim, tile.streamed) +
         4 * (VKF_SMEM_ROW_FLOATS(tile.owned) + VKF_SMEM_NONFINITE_FLAG_UINTS + VKF_SMEM_OPEN_TILE_BITS_UINTS);
}
// ...the forward: the tiles, the flag and the mask's closed key tiles...
uint32_t Coopmat2ForwardBytes(uint32_t head_dim, const WorkgroupTile& tile) {
  return Coopmat2KvTileBytes(head_dim, tile.streamed) + 4 * (VKF_SMEM_NONFINITE_FLAG_UINTS + VKF_SMEM_CLOSED_TILE_UINTS);
}
// ...and the backward kernels. dK/dV: its V rows, a region that holds its K rows once and then
// each step's Q and dO rows, the step's LSE and delta, its rows' non-finite steps and flag, and the
// mask's closed query tiles. dQ: K and V rows and their non-finite steps, and the owned rows' LSE
// and delta.
uint32_t Coopmat2BackwardBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, bool dkdv) {
  if (dkdv) {
    const uint32_t stride = VKF_TILE_STRIDE(VKF_ROW_U4(head_dim));
    return 16 * VKF_SMEM_DKDV_TILES_U4(owned, VKF_SMEM_DKDV_STREAM_ROWS(streamed, owned), stride) +
           4 * (2 * VKF_SMEM_ROW_FLOATS(streamed) + VKF_SMEM_NONFINITE_STEPS(streamed) + VKF_SMEM_NONFINITE_FLAG_UINTS +
                VKF_SMEM_CLOSED_TILE_UINTS);
  }
  return Coopmat2KvTileBytes(head_dim, streamed) + 4 * (2 * VKF_SMEM_ROW_FLOATS(owned) + VKF_SMEM_NONFINITE_STEPS(streamed));
}
// ...dQ from stored dS: the step's K rows and dS^T rows (streamed keys of the owned queries) and
// the keys' non-finite steps...
uint32_t Coopmat2DqFromDsBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed) {
  return 16 * (VKF_SMEM_CM2_DQ_FROM_DS_ROWS_U4(streamed, VKF_TILE_STRIDE(VKF_ROW_U4(head_dim))) +
               VKF_SMEM_CM2_DQ_FROM_DS_ROWS_U4(streamed, VKF_TILE_STRIDE(owned / 8))) +
         4 * VKF_SMEM_NONFINITE_STEPS(streamed);
}
// ...dK/dV storing dS: the dS^T tile it stages the stores through...
uint32_t Coopmat2StoreDsBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed) {
  return Coopmat2BackwardBytes(head_dim, owned, streamed, /*dkdv=*/true) +
         16 * VKF_SMEM_CM2_DS_TILE_U4(owned, streamed);
}
// ...and of dK/dV with atomic dQ: the dS^T tile, and the keys' non-finite flags.
uint32_t Coopmat2AtomicDqBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed) {
  return Coopmat2BackwardBytes(head_dim, owned, streamed, /*dkdv=*/true) +
         16 * VKF_SMEM_CM2_DS_TILE_U4(owned, streamed) +
         4 * (VKF_SMEM_NONFINITE_STEPS(owned) + VKF_SMEM_NONFINITE_FLAG_UINTS);
}
// An OxSxW tile (owned x streamed x workgroup) of ContextOptions::tile_overrides, if one is given.
std::optional<WorkgroupTile> ParseWorkgroupTile(const std::string& text) {
  WorkgroupTile t{0, 0, 0, 256};  // a forced tile is tried at every head dim and length
  if (!text.empty() && std::sscanf(text.c_str(), "%ux%ux%u", &t.owned, &t.streamed, &t.workgroup) == 3 &&
      t.owned > 0 && t.streamed > 0 && t.workgroup > 0) {
    return t;
  }
  return std::nullopt;
}

// The kernel choice of the VK_NV_cooperative_matrix2 kernels, whose row vectors or tiles are multiples of
// `granularity` (workgroup scope in the forward, subgroup scope in the backward).
KernelChoice Coopmat2Choice(const DeviceInfo& device, const std::string& kernel, uint32_t block_q, uint32_t block_kv,
                            uint32_t workgroup_size, uint32_t shared_bytes, uint32_t granularity) {
  KernelChoice choice;
  choice.kernel = kernel;
  choice.block_q = block_q;
  choice.block_kv = block_kv;
  choice.workgroup_size = workgroup_size;
  choice.shared_memory_bytes = shared_bytes;
  choice.cooperative_matrix = CooperativeMatrixApi::kNv2;
  choice.subgroup_size = device.subgroup_size;
  choice.matrix_granularity = granularity;
  return choice;
}

// The backward kernels: dK/dV, dK/dV with atomic dQ, dK/dV storing dS, dQ, dQ from stored dS.
enum class BackwardKernel { kDkdv, kDkdvAtomicDq, kDkdvStoreDs, kDq, kDqFromDs };

// The first tile of a backward kernel (a forced one first) the device can run: subgroup-scope
// matrices of the listed granularity, one subgroup size (the kernels give each subgroup its rows).
Result<KernelChoice> ChooseCoopmat2BackwardTile(const DeviceInfo& device, const AttentionParams& params,
                                                const TileOverrides& overrides, BackwardKernel kernel) {
  const uint32_t head_dim = params.shape.head_dim, g = device.cooperative_matrix2_subgroup_granularity;
  const bool dkdv = kernel != BackwardKernel::kDq && kernel != BackwardKernel::kDqFromDs;
  const bool atomic_dq = kernel == BackwardKernel::kDkdvAtomicDq;
  auto owned_rows = [](const SubgroupTile& tile) { return tile.rows * tile.subgroups; };
  auto shared_bytes = [&](const SubgroupTile& tile) {
    if (kernel == BackwardKernel::kDqFromDs) return Coopmat2DqFromDsBytes(head_dim, owned_rows(tile), tile.streamed);
    if (kernel == BackwardKernel::kDkdvStoreDs) return Coopmat2StoreDsBytes(head_dim, owned_rows(tile), tile.streamed);
    return atomic_dq ? Coopmat2AtomicDqBytes(head_dim, owned_rows(tile), tile.streamed)
                     : Coopmat2BackwardBytes(head_dim, owned_rows(tile), tile.streamed, dkdv);
  };
  // With atomic dQ each subgroup sums head_dim / subgroups columns of dQ, in float32 words of 4.
  auto dq_columns_fit = [&](const SubgroupTile& tile) {
    const uint32_t columns = head_dim / tile.subgroups;
    return !atomic_dq || (head_dim % tile.subgroups == 0 && columns % g == 0 && columns % 4 == 0);
  };
  // Stored dS's slots are padded for tiles of at most VKF_STORED_DS_PAD rows each way (a forced
  // tile could be larger).
  const bool stored_ds = kernel == BackwardKernel::kDkdvStoreDs || kernel == BackwardKernel::kDqFromDs;
  auto within_slot_padding = [&](const SubgroupTile& tile) {
    return !stored_ds || (owned_rows(tile) <= VKF_STORED_DS_PAD && tile.streamed <= VKF_STORED_DS_PAD);
  };
  // The softcap's tiles were measured on the deterministic kernels only.
  const bool softcap_deterministic =
      params.softcap > 0.0f && (kernel == BackwardKernel::kDkdv || kernel == BackwardKernel::kDq);
  auto fits = [&](const SubgroupTile& tile) {
    return g > 0 && within_slot_padding(tile) && !(tile.without_softcap_only && softcap_deterministic) &&
           (tile.rows == 16 || tile.rows == 32) && tile.rows % g == 0 && tile.streamed % g == 0 && head_dim % g == 0 &&
           head_dim <= tile.max_head_dim && device.subgroup_size > 0 &&
           device.min_subgroup_size == device.max_subgroup_size &&
           tile.subgroups * device.subgroup_size <= device.max_workgroup_invocations && dq_columns_fit(tile) &&
           shared_bytes(tile) <= device.usable_shared_memory_bytes;
  };
  // A forced OxSxW tile: W / subgroup size subgroups of O / subgroups rows each.
  std::optional<SubgroupTile> forced_tile;
  if (auto forced = ParseWorkgroupTile(dkdv ? overrides.coopmat2_dkdv : overrides.coopmat2_dq);
      forced && device.subgroup_size > 0 && forced->workgroup % device.subgroup_size == 0) {
    const uint32_t subgroups = forced->workgroup / device.subgroup_size;
    const SubgroupTile tile{subgroups, forced->owned / subgroups, forced->streamed, forced->max_head_dim};
    if (owned_rows(tile) == forced->owned) forced_tile = tile;
  }
  const std::span<const SubgroupTile> table =
      atomic_dq                                ? std::span<const SubgroupTile>(kCoopmat2AtomicDqTiles)
      : dkdv                                   ? std::span<const SubgroupTile>(kCoopmat2DkdvTiles)
      : kernel == BackwardKernel::kDqFromDs    ? std::span<const SubgroupTile>(kCoopmat2DqFromDsTiles)
                                               : std::span<const SubgroupTile>(kCoopmat2DqTiles);
  const std::optional<SubgroupTile> chosen = FirstTileThatFits(forced_tile, table, fits);
  if (!chosen) return NoTensorCoreTile(params);
  const uint32_t owned = owned_rows(*chosen);
  const char* name = kernel == BackwardKernel::kDkdvAtomicDq ? "backward_dkdv_atomic_dq_f16_coopmat2"
                     : kernel == BackwardKernel::kDkdvStoreDs ? "backward_dkdv_store_ds_f16_coopmat2"
                     : kernel == BackwardKernel::kDkdv        ? "backward_dkdv_f16_coopmat2"
                     : kernel == BackwardKernel::kDq          ? "backward_dq_f16_coopmat2"
                                                              : "backward_dq_from_ds_f16_coopmat2";
  return Coopmat2Choice(device, name, dkdv ? chosen->streamed : owned, dkdv ? owned : chosen->streamed,
                        chosen->subgroups * device.subgroup_size, shared_bytes(*chosen), g);
}

constexpr std::string_view kVariants[] = {"coopmat2"};

// Whether the device runs a forward-shaped kernel (ForwardMatricesFit) at `tile` whose own shared
// arrays take `shared_bytes`. The driver keeps some shared memory for the workgroup-scope matrices
// (VUID-RuntimeSpirv-maxComputeSharedMemorySize-10168): the kernel's own arrays get what is left.
bool ForwardTileRuns(const DeviceInfo& device, const WorkgroupTile& tile, uint32_t head_dim, uint32_t shared_bytes) {
  const uint32_t reserved = device.cooperative_matrix2_reserved_shared_memory;
  const uint32_t limit =
      reserved == 0 ? device.usable_shared_memory_bytes
                    : std::min(device.usable_shared_memory_bytes,
                               device.shared_memory_bytes > reserved ? device.shared_memory_bytes - reserved : 0u);
  return head_dim <= tile.max_head_dim && shared_bytes <= limit && tile.workgroup <= device.max_workgroup_invocations &&
         std::any_of(device.cooperative_matrix2_workgroups.begin(), device.cooperative_matrix2_workgroups.end(),
                     [&](const DeviceInfo::Coopmat2Workgroup& listed) {
                       return ForwardMatricesFit(listed, tile, head_dim, device.cooperative_matrix2_granularity);
                     });
}

// Whether the forward modifies the scores element by element (shaders/common/score_mod.glsl):
// a mask or bias, a softcap or ALiBi. Sinks join at the rows' ends and do not count.
bool ScoresModifiedPerElement(const AttentionParams& params) {
  return params.mask.type != MaskType::kNone || params.softcap > 0.0f || params.alibi != AlibiSlopes::kNone;
}

}  // namespace

std::span<const std::string_view> Coopmat2Backend::variants() const { return kVariants; }

// The workgroup-scope kernels need neither subgroup shuffles nor a fixed subgroup size.
std::string Coopmat2Backend::WhyUnusable(const DeviceInfo& device, std::string_view) const {
  if (!device.nv_cooperative_matrix2_f16) return "VK_NV_cooperative_matrix2 kernels cannot run";
  if (vk::FindShader("forward_f16_coopmat2") == nullptr) {
    return "this build has no VK_NV_cooperative_matrix2 kernel (glslang >= 14 needed)";
  }
  return "";
}

double MeanVisibleKeys(uint32_t q_len, uint32_t kv_len, const KeyBand& band) {
  if (q_len == 0) return kv_len;
  return double(SequenceVisiblePairs(band, q_len, kv_len)) / q_len;
}

bool Coopmat2Backend::Applies(const DeviceInfo& device, const AttentionParams& params) const {
  const uint32_t granularity = device.cooperative_matrix2_granularity;
  return device.use_cooperative_matrix2 && params.dtype == DataType::kFloat16 && granularity > 0 &&
         params.shape.head_dim % granularity == 0 && params.shape.head_dim <= 256;
}

Result<KernelChoice> Coopmat2Backend::ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                                    const TileOverrides& overrides) const {
  const double mean_keys = MeanVisibleKeys(params.shape.q_len, params.shape.kv_len, KeyBandOf(params));
  auto fits = [&](const WorkgroupTile& tile) {
    return mean_keys >= tile.min_mean_keys && !(tile.plain_scores_only && ScoresModifiedPerElement(params)) &&
           ForwardTileRuns(device, tile, params.shape.head_dim, Coopmat2ForwardBytes(params.shape.head_dim, tile));
  };
  const std::optional<WorkgroupTile> chosen = FirstTileThatFits(
      ParseWorkgroupTile(overrides.coopmat2_forward), std::span<const WorkgroupTile>(kCoopmat2ForwardTiles), fits);
  if (!chosen) return NoTensorCoreTile(params);
  return Coopmat2Choice(device, "forward_f16_coopmat2", chosen->owned, chosen->streamed, chosen->workgroup,
                        Coopmat2ForwardBytes(params.shape.head_dim, *chosen), device.cooperative_matrix2_granularity);
}

Result<KernelChoice> ChooseCoopmat2DecodeTile(const DeviceInfo& device, uint32_t head_dim, uint32_t rows,
                                              const TileOverrides& overrides) {
  auto fits = [&](const WorkgroupTile& tile) {
    return tile.owned >= rows && tile.owned <= tile.streamed &&
           ForwardTileRuns(device, tile, head_dim, Coopmat2DecodeBytes(head_dim, tile));
  };
  const std::optional<WorkgroupTile> chosen = FirstTileThatFits(
      ParseWorkgroupTile(overrides.decode_coopmat2), std::span<const WorkgroupTile>(kCoopmat2DecodeTiles), fits);
  if (!chosen) {
    return Status::Error(ErrorCode::kUnsupported, "no tensor-core decode tile holds " + std::to_string(rows) +
                                                      " packed rows at head dim " + std::to_string(head_dim));
  }
  return Coopmat2Choice(device, "forward_f16_decode_coopmat2", chosen->owned, chosen->streamed, chosen->workgroup,
                        Coopmat2DecodeBytes(head_dim, *chosen), device.cooperative_matrix2_granularity);
}

Result<BackwardKernelChoice> Coopmat2Backend::ChooseBackward(const DeviceInfo& device, const AttentionParams& params,
                                                            const TileOverrides& overrides) const {
  if (params.shape.head_dim > kBackwardMaxHeadDim) return NoTensorCoreTile(params);
  Result<BackwardKernelChoice> deterministic = BothBackwardKernels([&](bool dkdv) {
    return ChooseCoopmat2BackwardTile(device, params, overrides, dkdv ? BackwardKernel::kDkdv : BackwardKernel::kDq);
  });
  if (!deterministic.ok() || params.deterministic) return deterministic;
  // deterministic = false: atomic dQ where the dQ kernel would leave the device idle, else stored
  // dS where it pays (StoredDsPays), unless nondeterministic_dq names one. Where no tile of the
  // chosen kernels fits, the deterministic kernels run the call.
  const std::string& forced = overrides.nondeterministic_dq;
  const bool atomic = forced.empty() ? device.use_float32_atomic_add && AtomicDqPays(device, params, deterministic->dq)
                                     : forced == "atomic" && device.use_float32_atomic_add;
  if (atomic) {
    Result<KernelChoice> dkdv = ChooseCoopmat2BackwardTile(device, params, overrides, BackwardKernel::kDkdvAtomicDq);
    if (!dkdv.ok()) return deterministic;
    return BackwardKernelChoice{*dkdv, DqFromSumsChoice(device, params), /*atomic_dq=*/true};
  }
  const uint32_t max_mib = overrides.stored_ds_max_mib;
  const bool stored_ds = forced.empty() ? StoredDsPays(device, params, max_mib)
                                        : forced == "stored-ds" && StoredDsRuns(device, params, max_mib);
  if (!stored_ds) return deterministic;
  Result<KernelChoice> dkdv = ChooseCoopmat2BackwardTile(device, params, overrides, BackwardKernel::kDkdvStoreDs);
  Result<KernelChoice> dq = ChooseCoopmat2BackwardTile(device, params, overrides, BackwardKernel::kDqFromDs);
  if (!dkdv.ok() || !dq.ok()) return deterministic;
  BackwardKernelChoice choice{*dkdv, *dq};
  choice.stored_ds = true;
  return choice;
}

uint64_t StoredDsPairBytes(const AttentionShape& shape) {
  return uint64_t(shape.q_heads / shape.kv_heads) * VKF_STORED_DS_PADDED(uint64_t(shape.q_len)) *
         VKF_STORED_DS_PADDED(uint64_t(shape.kv_len)) * 2;
}

uint32_t StoredDsChunkPairs(const DeviceInfo& device, const AttentionShape& shape, uint32_t max_mib) {
  const uint64_t pairs = uint64_t(shape.batch) * shape.kv_heads, pair_bytes = StoredDsPairBytes(shape);
  const uint64_t group = shape.q_heads / shape.kv_heads;
  if (pairs == 0 || group == 0) return 0;
  const uint64_t max_bytes = max_mib == 0 ? StoredDsDefaultBytes(device) : uint64_t(max_mib) << 20;
  const uint64_t fit = std::min(max_bytes, device.max_storage_buffer_range) / pair_bytes;
  const uint64_t dispatchable = device.max_workgroup_count[1] / group;  // the dQ dispatch's y: query heads
  const uint64_t most = std::min({pairs, fit, dispatchable});
  if (most == 0) return 0;
  const uint64_t chunks = (pairs + most - 1) / most;
  return uint32_t((pairs + chunks - 1) / chunks);  // chunks of nearly even size (at most one pair apart)
}

uint64_t StoredDsDefaultBytes(const DeviceInfo& device) {
  return device.device_local_bytes > 0 ? device.device_local_bytes / 16 : uint64_t(1) << 30;
}

bool StoredDsRuns(const DeviceInfo& device, const AttentionParams& params, uint32_t max_mib) {
  const AttentionShape& shape = params.shape;
  return params.mask.type == MaskType::kNone && shape.q_len > 0 && shape.kv_len > 0 &&
         StoredDsChunkPairs(device, shape, max_mib) > 0;
}

bool StoredDsPays(const DeviceInfo& device, const AttentionParams& params, uint32_t max_mib) {
  const AttentionShape& shape = params.shape;
  return StoredDsRuns(device, params, max_mib) && shape.head_dim >= 128 &&
         StoredDsChunkPairs(device, shape, max_mib) == uint64_t(shape.batch) * shape.kv_heads;
}

bool AtomicDqPays(const DeviceInfo& device, const AttentionParams& params, const KernelChoice& dq) {
  const uint64_t dq_workgroups =
      uint64_t(params.shape.q_len + dq.block_q - 1) / dq.block_q * params.shape.q_heads * params.shape.batch;
  return dq_workgroups > 0 && 2 * dq_workgroups <= ComputeUnitsOrAssumed(device);
}

void Coopmat2Backend::SetSpecConstants(const KernelChoice& choice, const CoopmatLayout&, SpecConstants* spec) const {
  (*spec)[VKF_SPEC_SUBGROUP_SIZE] = choice.subgroup_size;
  (*spec)[VKF_SPEC_CM2_STAT_COLUMNS] = choice.matrix_granularity;
}

}  // namespace vkflash::attention
