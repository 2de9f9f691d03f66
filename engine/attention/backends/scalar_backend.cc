#include "attention/backends/scalar_backend.h"

#include <cstdio>
#include <optional>
#include <string>

#include "attention/backends/tile_search.h"
#include "common/shader_interface.h"
#include "common/shared_memory_sizes.h"
#include "util/ceil_div.h"
#include "util/status_macros.h"

namespace vkflash::attention {
namespace {

// The float16 P V loop's steps of keys tile a partial, and a partial of 16 keys with P <= 1 and |V| <
// 2048 (the shader's guard, FLOAT16_PARTIAL_SAFE_BITS in scalar/register_tile.glsl) stays below
// 32768. More keys per partial would save flushes (32: 8% at D = 128 on the H100) but let crafted V
// miss the float16 tolerance: their roundings add up (docs/tuning-log.md).
static_assert(VKF_TILED_FORWARD_FLOAT16_TERMS % VKF_TILED_FORWARD_PV_KEYS_PER_STEP == 0);
static_assert(VKF_TILED_FORWARD_FLOAT16_TERMS * 2048 <= 32768);

struct TileShape {
  uint32_t block_q, block_kv;
};

// The register-tiled forward (scalar/attention_forward_tiled.comp): rows x keys per step, the
// invocations sharing a row group, the rows each owns, the largest (and smallest) head dim the
// entry is for.
// Order from measurements (docs/tuning-log.md) on the H100 (2026-11-24 and 2026-11-27) and, for
// the first entry, the H200 (2026-11-28, "the scalar kernels' staged reads in flight together");
// float16, with K as floats where it fits; the 2026-11-27 numbers with 32 keys per float16 partial
// of P V, since 16. First that fits wins.
struct TiledTile {
  // Rows the workgroup owns (forward, dQ: query rows; dK/dV: keys) and streams per step.
  uint32_t owned, streamed, threads_per_row, rows_per_thread, max_head_dim = 256, min_head_dim = 0;
  // Only for head dims whose row words no even count of invocations divides: an entry for those
  // that must not displace a later one elsewhere (the forward tries the whole table with subgroup
  // reductions before any tile without).
  bool odd_row_words_only = false;
  uint32_t workgroup_size() const { return owned / rows_per_thread * threads_per_row; }
};
constexpr TiledTile kTiledForwardTiles[] = {
    {64, 32, 8, 4, 64},  // D <= 64: 32.7 TFLOP/s, 64x64x8x4 32.65, 128x32x4x4 32.4, 64x32x4x2 30.5 (H200)
    {64, 32, 4, 2, 64},  // D <= 64 where 8 invocations do not divide a row's words (D = 32 float16, 16 float32)
    {64, 64, 8, 4},      // 128 invocations, each 4 rows x 8 keys of S, 4 rows x D/8 columns of O
    {64, 32, 8, 4},      // D = 128 on 48 KB: 32.4 TFLOP/s (64x64 does not fit)
    {32, 32, 8, 2},      // 32 KB at D = 128: 28.8 with K as halves, before 32x16 with K as floats (26.0)
    {32, 16, 8, 2},
    {16, 16, 8, 2},      // 16 KB at D = 128 (K as halves): 23.1, against 20.6 for 32x8x8x2 with K as floats
    {16, 16, 4, 2},
    {8, 8, 4, 2},
    {8, 8, 2, 1},
    // Head dims whose row words only one invocation divides (float16 D = 40, 56, 72, 88, ...):
    // lavapipe only so far (2026-11-29), D = 40 forward 211 ms against 825 for 4x4x1x1 (64x32x1x1
    // 213, the per-row kernel 447); D = 72 92 against 296 (32x32x1x1 88). Fewer keys past D = 64,
    // for the registers of S beside D floats of O.
    {32, 32, 1, 1, 64, 0, true},
    {32, 16, 1, 1, 256, 0, true},
    {4, 4, 1, 1},        // anything with 16-byte loads
};

// The register-tiled gradient kernels (scalar/attention_backward_{dkdv,dq}_tiled.comp), the same
// fields (first that fits wins). Order from H100 measurements, float16, N = 4096, H * D = 2048,
// backward TFLOP/s with the other kernel at its default (docs/tuning-log.md, 2026-11-24 and 2026-11-27); entries
// with 4 invocations per row group take head dims whose row words 8 does not divide (float16 D = 96,
// 160, 224; float32 D = 48, 80, 112).
constexpr TiledTile kTiledDkdvTiles[] = {
    {64, 32, 8, 4, 64},  // D <= 64: 18.9 TFLOP/s (with dQ's 64x32x8x4) against 17.6-17.8 for 64x32x4x2, 32x32x8x2
    {64, 32, 4, 2, 64},  // (17.8)
    {32, 32, 16, 4, 128, 128},  // D = 128 on 48 KB: 18.56 against 17.95 for 32x32x8x2, 17.5 for 32x16x16x4 (2026-11-27)
    {32, 32, 8, 2},      // other head dims: 16.9 against 16.3-16.4 for 32x32x8x4, 32x16x8x2 at D = 128 (2026-11-24)
    {32, 32, 4, 2},      // (15.7)
    {32, 16, 8, 2},      // where 32x32 does not fit: 32 KB at D = 128 (15.5), 48 KB at D = 192
    {32, 16, 4, 2},
    {16, 16, 8, 2},      // 48 KB at D = 256, and float32 tensors at D = 128
    {16, 16, 4, 2},
    {16, 8, 4, 2},       // 16 KB at D = 128: 13.3 (with dQ's 16x8x4x2), 16x8x8x2 13.0, 8x16x8x1 12.0, 8x8x4x2 7.0
    {16, 8, 8, 2},       // (measured just below 16x8x4x2)
    {8, 8, 4, 2},        // smaller limits
    {8, 8, 2, 1},        // row words that 4 does not divide (float16 D = 80)
    // Row words only one invocation divides (float16 D = 40, 56, 72, ...), lavapipe only so far
    // (2026-11-29, whole backward): D = 40 114 ms against 252 for 4x4x1x1 (64x32x1x1 125, per-row
    // 406); D = 72 186 with 32x16x1x1 against 415 (32x32x1x1 208).
    {32, 32, 1, 1, 64, 0, true},
    {32, 16, 1, 1, 256, 0, true},
    {4, 4, 1, 1},        // anything with 16-byte loads
};
constexpr TiledTile kTiledDqTiles[] = {
    {64, 32, 8, 4, 64},  // D <= 64: best of 64x32x4x2, 64x32x8x2, 32x32x8x2, 64x16x8x4 (17.5-18.1 with them)
    {64, 32, 4, 2, 64},  // (18.0)
    {64, 16, 8, 4},      // D = 128 on 48 KB: 16.9 against 16.2-16.6 for 32x32x8x2, 32x32x8x4, 64x16x4x2
    {64, 16, 4, 2},      // (16.6)
    {32, 32, 8, 2},      // where 64 rows do not fit
    {32, 32, 4, 2},      // (15.6 at D = 128)
    {32, 16, 8, 2},      // 32 KB at D = 128 (15.5 with dK/dV's 32x16), 48 KB at D = 192
    {32, 16, 4, 2},
    {16, 16, 8, 2},      // 48 KB at D = 256, and float32 tensors at D = 128
    {16, 16, 4, 2},
    {16, 8, 4, 2},       // 16 KB at D = 128, as dK/dV's
    {16, 8, 8, 2},       // (measured just below 16x8x4x2)
    {8, 8, 4, 2},        // smaller limits
    {8, 8, 2, 1},        // row words that 4 does not divide (float16 D = 80)
    {32, 32, 1, 1, 64, 0, true},  // row words only one invocation divides: as dK/dV's
    {32, 16, 1, 1, 256, 0, true},
    {4, 4, 1, 1},        // anything with 16-byte loads
};

bool Float16Products(const DeviceInfo& device, DataType dtype) {
  return dtype == DataType::kFloat16 && device.use_float16_arithmetic;
}

// (rows a workgroup owns, rows of each streamed tile), largest first: more owned rows amortize
// each streamed tile over more work.
constexpr TileShape kForwardTiles[] = {{32, 32}, {16, 32}, {16, 16}, {8, 16}, {8, 8}, {4, 8},
                                       {4, 4},   {2, 4},   {1, 4},   {1, 2},  {1, 1}};
constexpr uint32_t kThreadsPerRow[] = {8, 4, 2, 1};

bool SubgroupsAllow(const DeviceInfo& device, uint32_t threads_per_row, uint32_t workgroup) {
  // Rows must not straddle subgroups, and every subgroup must be full (shuffles read lanes of the
  // same row only), whatever size in [min, max] the driver picks.
  return threads_per_row <= device.min_subgroup_size && device.max_subgroup_size != 0 &&
         workgroup % device.max_subgroup_size == 0;
}

bool ForwardFits(const DeviceInfo& device, uint32_t head_dim, TileShape tile, uint32_t threads_per_row, bool subgroup) {
  const uint32_t workgroup = tile.block_q * threads_per_row;
  if (workgroup > device.max_workgroup_invocations) return false;
  if (subgroup && !SubgroupsAllow(device, threads_per_row, workgroup)) return false;
  return ForwardSharedBytes(head_dim, tile.block_q, tile.block_kv, threads_per_row, subgroup) <=
         device.usable_shared_memory_bytes;
}

const char* DtypeSuffix(DataType dtype) { return dtype == DataType::kFloat16 ? "f16" : "f32"; }

Status NothingFits(const DeviceInfo& device, uint32_t head_dim) {
  return Status::Error(ErrorCode::kUnsupported,
                       "no tile fits head dim " + std::to_string(head_dim) + " in " +
                           std::to_string(device.usable_shared_memory_bytes) + " bytes of shared memory");
}

constexpr std::string_view kVariants[] = {"scalar"};

// OxSxTxR: a register-tiled kernel's tile (any head dim), or none.
std::optional<TiledTile> ParseTiledTile(const std::string& text) {
  uint32_t v[4] = {0, 0, 0, 0};
  if (text.empty() || std::sscanf(text.c_str(), "%ux%ux%ux%u", &v[0], &v[1], &v[2], &v[3]) != 4) return std::nullopt;
  if (!v[0] || !v[1] || !v[2] || !v[3]) return std::nullopt;
  return TiledTile{v[0], v[1], v[2], v[3], UINT32_MAX};
}

// VKFLASH_SCALAR_FORWARD_TILE: QxKxTxR, the register-tiled kernel's (rows, keys, invocations per
// row group, rows per invocation), tried first; QxKxT, the per-row kernel's (rows, keys,
// invocations per row), tried first by the per-row kernel, which then runs every call; "per-row",
// the per-row kernel with its own tiles for every call.
struct ForcedScalarTile {
  std::optional<TiledTile> tiled;
  bool per_row_kernel = false;
  std::optional<TileShape> per_row;
  uint32_t threads_per_row = 0;
};
ForcedScalarTile ParseScalarTile(const std::string& text) {
  ForcedScalarTile forced;
  if (text == "per-row") {
    forced.per_row_kernel = true;
    return forced;
  }
  forced.tiled = ParseTiledTile(text);
  uint32_t v[4] = {0, 0, 0, 0};
  const int n = text.empty() ? 0 : std::sscanf(text.c_str(), "%ux%ux%ux%u", &v[0], &v[1], &v[2], &v[3]);
  if (n == 3 && v[0] && v[1] && v[2]) {
    forced.per_row_kernel = true;
    forced.per_row = TileShape{v[0], v[1]};
    forced.threads_per_row = v[2];
  }
  return forced;
}

// Whether a register-tiled kernel can take the tile at this head dim, rows of `word_cols` columns
// per 16-byte word: whole words (16-byte loads), whole register blocks, a workgroup the device runs.
bool TiledShapeFits(const DeviceInfo& device, TiledTile tile, uint32_t head_dim, uint32_t word_cols) {
  const uint32_t row_words = head_dim / word_cols;
  return head_dim % 8 == 0 && head_dim <= tile.max_head_dim && head_dim >= tile.min_head_dim &&
         (!tile.odd_row_words_only || row_words % 2 == 1) &&
         tile.owned % tile.rows_per_thread == 0 &&
         row_words % tile.threads_per_row == 0 && tile.streamed % tile.threads_per_row == 0 &&
         tile.workgroup_size() <= device.max_workgroup_invocations;
}

// float_k_tile: with float16 products, K staged as floats (twice its words of halves).
bool TiledFits(const DeviceInfo& device, const AttentionParams& params, TiledTile tile, bool subgroup,
               bool float_k_tile) {
  const uint32_t head_dim = params.shape.head_dim;
  const uint32_t word_cols = Float16Products(device, params.dtype) ? 8 : 4, workgroup = tile.workgroup_size();
  if (!TiledShapeFits(device, tile, head_dim, word_cols)) return false;
  if (subgroup && !SubgroupsAllow(device, tile.threads_per_row, workgroup)) return false;
  return TiledForwardSharedBytes(head_dim, tile.owned, tile.streamed, workgroup, word_cols == 8, float_k_tile,
                                 subgroup) <= device.usable_shared_memory_bytes;
}

// The register-tiled forward's first tile that fits, if any: a forced tile with subgroup
// reductions or without (a workgroup smaller than a subgroup runs only without), then the table's.
std::optional<KernelChoice> ChooseTiledForward(const DeviceInfo& device, const AttentionParams& params,
                                               const ForcedScalarTile& forced) {
  const bool f16_products = Float16Products(device, params.dtype);
  const auto make_choice = [&](TiledTile tile, bool subgroup, bool float_k_tile) {
    KernelChoice choice;
    choice.kernel = std::string("forward_tiled_") + (f16_products ? "f16math" : DtypeSuffix(params.dtype)) +
                    (float_k_tile ? "_kf32" : "") + (subgroup ? "_subgroup" : "_shared");
    choice.block_q = tile.owned;
    choice.block_kv = tile.streamed;
    choice.threads_per_row = tile.threads_per_row;
    choice.workgroup_size = tile.workgroup_size();
    choice.subgroup_reductions = subgroup;
    choice.shared_memory_bytes = TiledForwardSharedBytes(params.shape.head_dim, tile.owned, tile.streamed,
                                                         choice.workgroup_size, f16_products, float_k_tile, subgroup);
    return choice;
  };
  // On a driver with a loop budget, one step (and the fixed part) must fit half of it
  // (chunk_plan.h); a smaller tile, or the per-row kernel, runs the call otherwise.
  const auto fits = [&](TiledTile tile, bool subgroup, bool float_k_tile) {
    return (!subgroup || device.use_subgroup_ops) && TiledFits(device, params, tile, subgroup, float_k_tile) &&
           OneStepFits(device, TiledForwardLoopCost(make_choice(tile, subgroup, float_k_tile), params.shape.head_dim));
  };
  // With float16 products, K as floats wherever the tile still fits: S's products then widen
  // only Q's halves (H100, D = 128, alone: 26.3 against 25.5 TFLOP/s; docs/tuning-log.md).
  const auto choose = [&](TiledTile tile, bool subgroup) {
    return make_choice(tile, subgroup, f16_products && fits(tile, subgroup, true));
  };
  if (forced.tiled) {
    for (bool subgroup : {true, false}) {
      if (fits(*forced.tiled, subgroup, false)) return choose(*forced.tiled, subgroup);
    }
  }
  const std::span<const TiledTile> table(kTiledForwardTiles);
  for (bool subgroup : {true, false}) {
    const auto fits_here = [&](TiledTile tile) { return fits(tile, subgroup, false); };
    if (const std::optional<TiledTile> tile = FirstTileThatFits(std::optional<TiledTile>(), table, fits_here)) {
      return choose(*tile, subgroup);
    }
  }
  return std::nullopt;
}

// VKFLASH_SCALAR_BACKWARD_TILE: "DKDV,DQ", each OxSxTxR (either may be empty), the register-tiled
// gradient kernels' tiles tried first; "per-row": the per-row kernels for every call.
struct ForcedBackwardTiles {
  bool per_row_kernels = false;
  std::optional<TiledTile> dkdv, dq;
};
ForcedBackwardTiles ParseBackwardTiles(const std::string& text) {
  ForcedBackwardTiles forced;
  if (text == "per-row") {
    forced.per_row_kernels = true;
    return forced;
  }
  const size_t comma = text.find(',');
  forced.dkdv = ParseTiledTile(text.substr(0, comma));
  if (comma != std::string::npos) forced.dq = ParseTiledTile(text.substr(comma + 1));
  return forced;
}

// The register-tiled dK/dV (dkdv) or dQ kernel's first tile that fits, if any.
std::optional<KernelChoice> ChooseTiledGradient(const DeviceInfo& device, const AttentionParams& params, bool dkdv,
                                                const std::optional<TiledTile>& forced) {
  const uint32_t head_dim = params.shape.head_dim;
  const bool half_words = params.dtype == DataType::kFloat16;
  const auto make_choice = [&](TiledTile tile) {
    KernelChoice choice;
    choice.kernel = std::string(dkdv ? "backward_dkdv_tiled_" : "backward_dq_tiled_") + DtypeSuffix(params.dtype);
    choice.block_q = dkdv ? tile.streamed : tile.owned;
    choice.block_kv = dkdv ? tile.owned : tile.streamed;
    choice.threads_per_row = tile.threads_per_row;
    choice.workgroup_size = tile.workgroup_size();
    choice.subgroup_reductions = false;
    choice.shared_memory_bytes =
        TiledBackwardSharedBytes(head_dim, tile.owned, tile.streamed, tile.rows_per_thread, half_words, dkdv);
    return choice;
  };
  const auto fits = [&](TiledTile tile) {
    if (!TiledShapeFits(device, tile, head_dim, half_words ? 8 : 4)) return false;
    const KernelChoice choice = make_choice(tile);
    if (choice.shared_memory_bytes > device.usable_shared_memory_bytes) return false;
    return OneStepFits(device, dkdv ? ScalarDkdvLoopCost(choice, head_dim) : ScalarDqLoopCost(choice, head_dim));
  };
  const std::span<const TiledTile> table = dkdv ? std::span<const TiledTile>(kTiledDkdvTiles)
                                                        : std::span<const TiledTile>(kTiledDqTiles);
  const std::optional<TiledTile> tile = FirstTileThatFits(forced, table, fits);
  if (!tile) return std::nullopt;
  return make_choice(*tile);
}

}  // namespace

bool IsTiledForward(const KernelChoice& choice) { return choice.kernel.rfind("forward_tiled_", 0) == 0; }

bool IsTiledBackward(const KernelChoice& choice) {
  return choice.kernel.rfind("backward_dkdv_tiled_", 0) == 0 || choice.kernel.rfind("backward_dq_tiled_", 0) == 0;
}

uint32_t TiledBackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, uint32_t rows_per_thread,
                                  bool half_words, bool dkdv) {
  const uint32_t stride = VKF_ODD_STRIDE(VKF_TILED_ROW_WORDS(head_dim, half_words ? 8 : 4));
  // Two owned tensors and two streamed ones; dK/dV: P^T, dS^T and the step's LSE and delta, dQ: dS.
  const uint32_t words = 2 * VKF_SMEM_TILED_WORDS(owned, stride) + 2 * VKF_SMEM_TILED_WORDS(streamed, stride);
  // Float arrays rounded up to 16 bytes: the driver starts each vec4 array at a multiple of 16
  // (NVIDIA's reported 12 bytes more than the elements' sum for dK/dV at D = 128).
  const auto float_bytes = [](uint32_t floats) { return 16 * CeilDiv(floats, 4u); };
  const uint32_t by_owned_row = VKF_TILED_SCORES_BY_OWNED_ROW(rows_per_thread);
  const uint32_t score_bytes =
      float_bytes(VKF_SMEM_TILED_SCORE_FLOATS(owned, VKF_TILED_SCORE_STRIDE(streamed), by_owned_row)) +
      16 * VKF_SMEM_TILED_SCORE_VEC4S(streamed, VKF_TILED_SCORE_ROW_VEC4S(owned), by_owned_row);
  return 16 * words + (dkdv ? 2 * score_bytes + float_bytes(2 * VKF_SMEM_ROW_FLOATS(streamed)) : score_bytes);
}

uint32_t TiledForwardSharedBytes(uint32_t head_dim, uint32_t block_q, uint32_t block_kv, uint32_t workgroup_size,
                                 bool float16_words, bool float_k_tile, bool subgroup_reductions) {
  const uint32_t word_cols = float16_words ? 8 : 4, p_bytes = float16_words ? 2 : 4;
  const uint32_t stride = VKF_ODD_STRIDE(VKF_TILED_ROW_WORDS(head_dim, word_cols));
  const uint32_t k_stride = float_k_tile ? VKF_ODD_STRIDE(VKF_TILED_ROW_WORDS(head_dim, 4)) : stride;
  const uint32_t words = VKF_SMEM_TILED_WORDS(block_q, stride) + VKF_SMEM_TILED_WORDS(block_kv, stride) +
                         VKF_SMEM_TILED_WORDS(block_kv, k_stride);
  const uint32_t p = p_bytes * VKF_SMEM_TILED_P_ELEMENTS(block_q, VKF_TILED_P_STRIDE(block_kv, p_bytes));
  const uint32_t reduce = subgroup_reductions ? 0 : 4 * VKF_SMEM_ROW_REDUCE_FLOATS(workgroup_size);
  const uint32_t guards = float16_words ? 4 * VKF_SMEM_TILED_ABS_MAX_UINTS(block_kv) : 0;
  return 16 * words + p + reduce + guards;
}

std::span<const std::string_view> ScalarBackend::variants() const { return kVariants; }

uint32_t ForwardSharedBytes(uint32_t head_dim, uint32_t block_q, uint32_t block_kv, uint32_t threads_per_row,
                            bool subgroup_reductions) {
  const uint32_t head_vec4 = VKF_HEAD_VEC4(head_dim), stride = VKF_ODD_STRIDE(head_vec4);
  const uint32_t reduce = subgroup_reductions ? 0 : 4 * VKF_SMEM_ROW_REDUCE_FLOATS(block_q * threads_per_row);
  return 16 * (VKF_SMEM_OWNED_VEC4S(block_q, head_vec4) + VKF_SMEM_STREAMED_VEC4S(block_kv, stride)) +
         4 * VKF_SMEM_SCORE_FLOATS(block_q, block_kv) + reduce;
}

Result<KernelChoice> ScalarBackend::ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                                  const TileOverrides& overrides) const {
  const ForcedScalarTile forced = ParseScalarTile(overrides.scalar_forward);
  if (!forced.per_row_kernel) {
    if (std::optional<KernelChoice> tiled = ChooseTiledForward(device, params, forced)) return *tiled;
  }
  return ChoosePerRowForward(device, params, overrides);
}

Result<KernelChoice> ChoosePerRowForward(const DeviceInfo& device, const AttentionParams& params,
                                         const TileOverrides& overrides) {
  const uint32_t head_dim = params.shape.head_dim;
  const ForcedScalarTile forced = ParseScalarTile(overrides.scalar_forward);
  const auto make_choice = [&](TileShape tile, uint32_t threads_per_row, bool subgroup) {
    KernelChoice choice;
    choice.kernel = std::string("forward_") + DtypeSuffix(params.dtype) + (subgroup ? "_subgroup" : "_shared");
    choice.block_q = tile.block_q;
    choice.block_kv = tile.block_kv;
    choice.threads_per_row = threads_per_row;
    choice.workgroup_size = tile.block_q * threads_per_row;
    choice.subgroup_reductions = subgroup;
    choice.shared_memory_bytes = ForwardSharedBytes(head_dim, tile.block_q, tile.block_kv, threads_per_row, subgroup);
    return choice;
  };
  for (bool subgroup : {true, false}) {
    if (subgroup && !device.use_subgroup_ops) continue;
    if (forced.per_row && ForwardFits(device, head_dim, *forced.per_row, forced.threads_per_row, subgroup)) {
      return make_choice(*forced.per_row, forced.threads_per_row, subgroup);
    }
    for (uint32_t threads_per_row : kThreadsPerRow) {
      for (TileShape tile : kForwardTiles) {
        if (ForwardFits(device, head_dim, tile, threads_per_row, subgroup)) return make_choice(tile, threads_per_row, subgroup);
      }
    }
  }
  return NothingFits(device, head_dim);
}

uint32_t BackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, bool dkdv) {
  const uint32_t head_vec4 = VKF_HEAD_VEC4(head_dim), stride = VKF_ODD_STRIDE(head_vec4);
  // Two owned tensors and two streamed ones; dK/dV: P^T, dS^T and the tile's LSE and delta, dQ: dS.
  const uint32_t vec4s = 2 * VKF_SMEM_OWNED_VEC4S(owned, head_vec4) + 2 * VKF_SMEM_STREAMED_VEC4S(streamed, stride);
  const uint32_t floats = dkdv ? 2 * VKF_SMEM_SCORE_FLOATS(owned, streamed) + 2 * VKF_SMEM_ROW_FLOATS(streamed)
                               : VKF_SMEM_SCORE_FLOATS(owned, streamed);
  return 16 * vec4s + 4 * floats;
}

Result<BackwardKernelChoice> ChoosePerRowBackward(const DeviceInfo& device, const AttentionParams& params) {
  const uint32_t head_dim = params.shape.head_dim;
  // Both gradient kernels hold two owned row blocks and two streamed tiles: the forward's list
  // of (owned, streamed) shapes serves them too.
  auto choose = [&](bool dkdv) -> Result<KernelChoice> {
    for (uint32_t threads_per_row : kThreadsPerRow) {
      for (TileShape tile : kForwardTiles) {
        const uint32_t owned = tile.block_q, streamed = tile.block_kv;
        const uint32_t bytes = BackwardSharedBytes(head_dim, owned, streamed, dkdv);
        if (owned * threads_per_row > device.max_workgroup_invocations || bytes > device.usable_shared_memory_bytes) {
          continue;
        }
        KernelChoice choice;
        choice.kernel = std::string(dkdv ? "backward_dkdv_" : "backward_dq_") + DtypeSuffix(params.dtype);
        choice.block_q = dkdv ? streamed : owned;
        choice.block_kv = dkdv ? owned : streamed;
        choice.threads_per_row = threads_per_row;
        choice.workgroup_size = owned * threads_per_row;
        choice.subgroup_reductions = false;
        choice.shared_memory_bytes = bytes;
        return choice;
      }
    }
    return NothingFits(device, head_dim);
  };
  return BothBackwardKernels(choose);
}

Result<BackwardKernelChoice> ScalarBackend::ChooseBackward(const DeviceInfo& device, const AttentionParams& params,
                                                          const TileOverrides& overrides) const {
  VKF_ASSIGN_OR_RETURN(BackwardKernelChoice choice, ChoosePerRowBackward(device, params));
  const ForcedBackwardTiles forced = ParseBackwardTiles(overrides.scalar_backward);
  if (forced.per_row_kernels) return choice;
  // Each gradient kernel register-tiled where one of its tiles fits, else per-row.
  if (std::optional<KernelChoice> dkdv = ChooseTiledGradient(device, params, /*dkdv=*/true, forced.dkdv)) choice.dkdv = *dkdv;
  if (std::optional<KernelChoice> dq = ChooseTiledGradient(device, params, /*dkdv=*/false, forced.dq)) choice.dq = *dq;
  return choice;
}

namespace {

// Loop iterations of the scalar kernels' row reductions (scalar/row_reduce.glsl): a shuffle loop
// of log2(threads per row), or a loop over the row's invocations through shared memory.
uint64_t ReductionLoops(const KernelChoice& choice) {
  return choice.subgroup_reductions ? 8 : 2 * uint64_t(choice.threads_per_row);
}

// A register-tiled kernel's stager (scalar/register_tile.glsl) of `rows` rows of `row_words` global
// words: per batch of `batch_words` words an invocation reads, one trip and two loops of that many
// trips (the reads, then the stores).
uint64_t StagerLoops(uint64_t rows, uint64_t row_words, uint32_t workgroup_size, uint64_t batch_words) {
  return CeilDiv(rows * row_words, uint64_t(workgroup_size) * batch_words) * (1 + 2 * batch_words);
}

}  // namespace

// Each term names the loop of shaders/scalar/attention_forward.comp it counts. A vec4 load or store of a
// tensor (tensor_io.glsl) loops over its 4 columns.
LoopCost ScalarForwardLoopCost(const KernelChoice& choice, uint32_t head_dim, bool instrumented) {
  if (IsTiledForward(choice)) return TiledForwardLoopCost(choice, head_dim);
  const uint64_t head_vec4 = CeilDiv(head_dim, 4), lane_vec4s = CeilDiv(head_vec4, choice.threads_per_row);
  const uint64_t lane_keys = CeilDiv(choice.block_kv, choice.threads_per_row), reduce = ReductionLoops(choice);
  LoopCost cost;
  cost.fixed = CeilDiv(uint64_t(choice.block_q) * head_vec4, choice.workgroup_size) * 5  // Q tile
               + 3 * lane_vec4s                                                        // zero, resume, rescale O
               + 5 * lane_vec4s                                                        // store O or the state
               + reduce + 8;                                                           // row sum, slack
  cost.per_step = 2 * CeilDiv(uint64_t(choice.block_kv) * head_vec4, choice.workgroup_size) * 5  // K, V tiles
                  + lane_keys * (1 + head_vec4)                                       // S
                  + reduce + lane_keys + lane_vec4s                                   // row max, P, rescale O
                  + lane_vec4s * (1 + uint64_t(choice.block_kv))                      // O += P V
                  + (instrumented ? 2 * reduce : 0) + 1;                              // statistics, the tile loop
  return cost;
}

// ...of shaders/scalar/attention_forward_tiled.comp, both of its P V paths (float16 and float32
// products) counted, as a row may take either.
LoopCost TiledForwardLoopCost(const KernelChoice& choice, uint32_t head_dim) {
  const bool f16_words = choice.kernel.find("f16math") != std::string::npos;
  const bool float_k_tile = !f16_words || choice.kernel.find("_kf32") != std::string::npos;
  const bool f32_storage = choice.kernel.find("_f32_") != std::string::npos;
  const uint64_t word_cols = f16_words ? 8 : 4, global_cols = f32_storage ? 4 : 8;
  const uint64_t rows = uint64_t(choice.block_q) * choice.threads_per_row / choice.workgroup_size;  // per invocation
  const uint64_t keys = choice.block_kv / choice.threads_per_row, row_words = head_dim / word_cols;
  const uint64_t lane_words = row_words / choice.threads_per_row, lane_vec4s = lane_words * word_cols / 4;
  const uint64_t global_words = head_dim / global_cols, reduce = ReductionLoops(choice);
  LoopCost cost;
  cost.fixed = StagerLoops(choice.block_q, global_words, choice.workgroup_size, VKF_STAGE_BATCH_WORDS)  // Q tile
               + 2 * rows * (1 + lane_vec4s)                                          // zero, resume
               + rows * (reduce + 5 * lane_vec4s + 1) + 8;                            // store O or the state; slack
  // S: one iteration per trip of VKF_TILED_FORWARD_S_WORDS_PER_STEP words; per word the rows'
  // words, then per key its word (a loop over its vec4s where K is floats) and the rows' products
  // (word_dot_add loops over the vec4s of a word); zero and scale S. Counted as if the driver
  // unrolled no loop.
  const uint64_t word_vec4s = word_cols / 4, k_word_loops = float_k_tile ? word_vec4s : 0;
  // The unrolled iterations of a last partial trip count too (those past the end break).
  const uint64_t s_steps = CeilDiv(row_words, VKF_TILED_FORWARD_S_WORDS_PER_STEP);
  const uint64_t s = s_steps + s_steps * VKF_TILED_FORWARD_S_WORDS_PER_STEP *
                                   (1 + rows + keys * (1 + k_word_loops + rows * (1 + word_vec4s))) +
                     2 * rows * keys;
  const uint64_t pv_f32 = uint64_t(choice.block_kv) * (1 + rows + lane_words * (1 + rows));
  // float16 P V: per partial its zeroing and flush and its keys' iterations, per key the rows' P
  // and the lane's words.
  const uint64_t terms = VKF_TILED_FORWARD_FLOAT16_TERMS;
  const uint64_t pv_f16 = CeilDiv(choice.block_kv, terms) * (3 * rows * 4 * lane_words + terms / VKF_TILED_FORWARD_PV_KEYS_PER_STEP +
                                                               terms * (1 + rows + lane_words * (1 + rows)));
  const uint64_t stage_kv =
      StagerLoops(choice.block_kv, global_words, choice.workgroup_size, VKF_STAGE_PAIR_BATCH_WORDS);
  cost.per_step = stage_kv                                                                  // K, V tiles
                  + s + rows * (1 + keys)                                                   // S, masking
                  + rows * (2 * keys + reduce + lane_vec4s + 1)                             // softmax
                  + rows * uint64_t(choice.block_kv)                                        // V guard of masked tiles
                  + pv_f32 + pv_f16 + 1;                                                    // O += P V, the loop
  return cost;
}

namespace {

// The register-tiled gradient kernels' loops (scalar/attention_backward_{dkdv,dq}_tiled.comp),
// which share their shape: a register block of two products over the head dim (S and dP), then
// sums over the streamed rows into the owned rows' columns.
struct TiledGradientLoops {
  uint64_t rows, streamed_per_lane, row_words, lane_words, lane_vec4s, word_vec4s;
};
TiledGradientLoops TiledLoops(const KernelChoice& choice, uint32_t head_dim, bool dkdv) {
  const bool half_words = choice.kernel.find("_f16") != std::string::npos;
  TiledGradientLoops l;
  const uint64_t owned = dkdv ? choice.block_kv : choice.block_q, streamed = dkdv ? choice.block_q : choice.block_kv;
  l.rows = owned * choice.threads_per_row / choice.workgroup_size;
  l.streamed_per_lane = streamed / choice.threads_per_row;
  l.word_vec4s = half_words ? 2 : 1;
  l.row_words = head_dim / (4 * l.word_vec4s);
  l.lane_words = l.row_words / choice.threads_per_row;
  l.lane_vec4s = l.lane_words * l.word_vec4s;
  return l;
}
// Staging `rows` rows of two tensors with one pair stager (a global word is a shared one: float16
// tensors stay halves).
uint64_t PairStageLoops(const KernelChoice& choice, uint64_t rows, const TiledGradientLoops& l) {
  return StagerLoops(rows, l.row_words, choice.workgroup_size, VKF_STAGE_PAIR_BATCH_WORDS);
}
// S and dP (zeroing; the word loop: the owned rows' words, then per streamed row its words and
// the products, word_dot_add looping over every vec4 of a word, twice; dQ's words come 4 a trip, an
// unrolled loop in a loop, and a loop for the rest; the epilogue: per streamed row its scores, then
// the store of each score tile), then the sums over `streamed` rows (each score tile's load, then
// per word of the lane the products, one iteration per vec4 of the word). A score tile's store or
// load is counted as one iteration per owned row (scalar/score_tile.glsl: 1 or 1/4).
uint64_t TiledStepLoops(const TiledGradientLoops& l, uint64_t streamed, bool dkdv) {
  const uint64_t score_tiles = dkdv ? 2 : 1;  // dK/dV: P^T and dS^T; dQ: dS
  const uint64_t zeros = l.rows * (1 + l.streamed_per_lane);
  const uint64_t epilogue = l.streamed_per_lane * (1 + l.rows + score_tiles * l.rows);
  const uint64_t word = 1 + l.rows + l.streamed_per_lane * (1 + l.rows * (1 + 2 * l.word_vec4s));
  const uint64_t words = l.row_words * word + (dkdv ? 0 : l.row_words / VKF_TILED_DQ_WORDS_PER_TRIP + 2);
  const uint64_t sums = streamed * (1 + score_tiles * l.rows + l.lane_words * (1 + l.rows * (1 + l.word_vec4s)));
  return zeros + epilogue + words + sums;
}

}  // namespace

// ...of shaders/scalar/attention_backward_dq.comp (Q and dO rows, then K and V tiles: two loads each).
LoopCost ScalarDqLoopCost(const KernelChoice& choice, uint32_t head_dim) {
  if (IsTiledBackward(choice)) {  // ...of shaders/scalar/attention_backward_dq_tiled.comp
    const TiledGradientLoops l = TiledLoops(choice, head_dim, /*dkdv=*/false);
    LoopCost cost;
    cost.fixed = PairStageLoops(choice, choice.block_q, l)              // Q, dO rows
                 + l.rows * (1 + 6 * l.lane_vec4s)                      // zero, resume
                 + l.rows * (1 + 5 * l.lane_vec4s) + 8;                 // store dQ or the state; slack
    cost.per_step = PairStageLoops(choice, choice.block_kv, l)          // K, V tiles
                    + TiledStepLoops(l, choice.block_kv, false) + l.rows + 1;  // dS, dQ += dS K; limits; the loop
    return cost;
  }
  const uint64_t head_vec4 = CeilDiv(head_dim, 4), lane_vec4s = CeilDiv(head_vec4, choice.threads_per_row);
  LoopCost cost;
  cost.fixed = CeilDiv(uint64_t(choice.block_q) * head_vec4, choice.workgroup_size) * 9  // Q, dO rows
               + lane_vec4s * (1 + 5 + 5 + 5) + 8;                                     // zero, resume, store, slack
  cost.per_step = CeilDiv(uint64_t(choice.block_kv) * head_vec4, choice.workgroup_size) * 9  // K, V tiles
                  + CeilDiv(choice.block_kv, choice.threads_per_row) * (1 + head_vec4)    // dS
                  + lane_vec4s * (1 + uint64_t(choice.block_kv)) + 1;                     // dQ += dS K, loop
  return cost;
}

// ...of shaders/scalar/attention_backward_dkdv.comp (its K and V rows, then Q and dO tiles).
LoopCost ScalarDkdvLoopCost(const KernelChoice& choice, uint32_t head_dim) {
  if (IsTiledBackward(choice)) {  // ...of shaders/scalar/attention_backward_dkdv_tiled.comp
    const TiledGradientLoops l = TiledLoops(choice, head_dim, /*dkdv=*/true);
    LoopCost cost;
    cost.fixed = PairStageLoops(choice, choice.block_kv, l)             // K, V rows
                 + l.rows * (1 + 2 * (1 + 5 * l.lane_vec4s))            // zero, resume
                 + l.rows * (1 + 2 * 5 * l.lane_vec4s) + 1 + 8;         // store; heads loop; slack
    cost.per_step = PairStageLoops(choice, choice.block_q, l)           // Q, dO tiles
                    + CeilDiv(choice.block_q, choice.workgroup_size)     // LSE, delta
                    + TiledStepLoops(l, choice.block_q, true) + l.rows + 2;  // P^T, dS^T, dV and dK sums; limits; loops
    return cost;
  }
  const uint64_t head_vec4 = CeilDiv(head_dim, 4), lane_vec4s = CeilDiv(head_vec4, choice.threads_per_row);
  LoopCost cost;
  cost.fixed = CeilDiv(uint64_t(choice.block_kv) * head_vec4, choice.workgroup_size) * 9  // K, V rows
               + lane_vec4s * (1 + 9 + 9) + 1 + 8;                 // zero, resume, store; heads loop; slack
  cost.per_step = CeilDiv(uint64_t(choice.block_q) * head_vec4, choice.workgroup_size) * 9  // Q, dO tiles
                  + CeilDiv(choice.block_q, choice.workgroup_size)                          // LSE, delta
                  + CeilDiv(choice.block_q, choice.threads_per_row) * (1 + head_vec4)       // P^T, dS^T
                  + lane_vec4s * (1 + uint64_t(choice.block_q)) + 2;  // dV, dK sums; tile and heads loops
  return cost;
}

}  // namespace vkflash::attention
