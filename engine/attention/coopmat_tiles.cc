#include "attention/coopmat_tiles.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <string>

#include "attention/tile_config.h"
#include "util/environment.h"

namespace vkflash::attention {
namespace {

// Forward: subgroups per workgroup, 16-row blocks per subgroup, keys per tile; preferred first.
// Order from `vkflash bench` over these candidates on the H100 (README, "Tile choice"): at D=128
// they were within 2% of each other (47-48 TFLOP/s) except 64 keys beat 32; at D=64 one row
// block per subgroup won (53 vs 48-50). Smaller tiles are for devices with less shared memory.
struct ForwardTile {
  uint32_t subgroups, m_blocks, block_kv;
};
constexpr ForwardTile kForwardTiles[] = {{4, 1, 64}, {8, 1, 64}, {4, 2, 64}, {4, 1, 32}, {2, 1, 32}, {1, 1, 16}};

// Backward: subgroups (each owns 16 rows) and rows per streamed tile; preferred first.
struct BackwardTile {
  uint32_t subgroups, streamed;
};
constexpr BackwardTile kDkdvTiles[] = {{4, 32}, {4, 16}, {2, 32}, {2, 16}, {1, 16}};
constexpr BackwardTile kDqTiles[] = {{4, 32}, {4, 64}, {2, 32}, {1, 16}};

// The VK_NV_cooperative_matrix2 forward (workgroup-scope matrices): rows a workgroup owns, rows of
// each streamed tile, workgroup size, and the largest head dim the tile is for (registers grow
// with it); preferred first. The streamed tiles (K and V) are staged in shared memory, so the
// tile must also fit the device's shared memory (Coopmat2ForwardBytes).
// Ordered by `vkflash bench` on the H100 at N=4096 (TFLOP/s):
//   D=128: 64x64/128 242, 128x64/256 235, 64x32/128 206, 128x32/256 194, 32x32/64 155,
//         128x64/128 162; again at ea1e4ca: 128x64/256 245, 64x64/128 239, 64x32/128 203,
//         128x32/256 194 (64x64/128 stays first: it leads at N=1024 and causal, README "Speed,
//         today"); 128x32/128 182 (255 registers, spilling), 96x64/128 172, 64x64/64 135.
//   D=64: 128x64/128 259, 64x128/128 230, 64x64/128 226, 128x128/256 220, 128x32/128 213,
//         128x64/256 178; at ea1e4ca 128x64/128 264, 64x128/128 227, 64x64/128 227, 128x128/256
//         220; 256x64/256 218, 256x32/256 171.
//   D=256: 64x32/128 166, 128x32/256 155, 32x32/128 138, 64x32/256 113; at ea1e4ca 64x32/128 194,
//         128x32/256 180, 32x32/128 139, 64x32/256 115.
// A tile may also ask for rows that see at least `min_mean_keys` keys on average (MeanVisibleKeys):
// 128x64/256 at D=128 halves the K/V copies per product, but with one workgroup per SM (255
// registers) only long loops repay its longer prologue and epilogue. At 743ae70, two device runs,
// 128x64/256 against 64x64/128 (TFLOP/s; mean keys per row in brackets):
//   N=16384 259.1 / 250.2 [16384], causal 253.1 / 247.4 [8192]; N=8192 261.0 / 245.1 [8192],
//   causal 237.4 / 236.2 [4096]; N=4096 245.0 / 239.8 [4096], causal 215.3 / 221.2 [2048];
//   N=2048 227.8 / 226.5 [2048], causal 183.8 / 199.2 [1024]; N=1024 194.9 / 206.8 [1024].
//   D=96 (at 59ba852, another device run): N=16384 238.8 / 223.6, causal 221.0 / 215.4; N=8192
//   229.9 / 218.8, causal 208.0 / 205.0; N=4096 217.4 / 213.2.
// 64x80/128 (80 keys: a multiple of the H100's N and K granularity of 16 at 128 invocations, 237
// registers, 45.5 KB with the driver's share) against 64x64/128, at 67ec9b7, one device run, two
// reps each (B*N = 16384, H = 2048/D; mean keys per row in brackets):
//   D=128: N=1024 211.9-212.0 / 207.7-208.5 [1024], N=2048 229.3-232.4 / 227.3-227.5, causal
//   N=2048 198.5-199.1 / 198.7-199.3 [1024.5], causal N=4096 222.4-222.5 / 222.0-222.3; below
//   1024 keys it loses: N=512 172.5-173.6 / 176.2-177.3, causal N=1024 165.3-165.4 / 165.9-166.3.
//   D=96: N=1024 195.4-196.4 / 186.2-188.2, N=2048 213.8-214.3 / 201.6-201.9, causal N=2048
//   182.0-183.1 / 178.8, causal N=4096 203.9-204.0 / 196.5-199.0; N=512 159.8-161.8 /
//   161.2-162.8, causal N=512 114.2-114.5 / 119.9-120.8.
//   At long rows (another run, D=128) it is about even with 128x64/256: N=16384 260.2 / 258.2-259.3,
//   N=8192 255.2-255.4 / 259.5-260.1, N=4096 245.7 / 246.0-246.5.
// At D=96 96 keys do better still (64x96/128, 40 KB staged; at 36e29ab, one device run, two reps,
// against 64x80/128): N=1024 197.8-200.4 / 195.0-197.2, N=2048 218.8 / 212.5-214.5, causal N=4096
// 212.3-212.5 / 204.0; 112 keys (64x112/128, 46.6 KB) 195.2-196.4, 223.2-223.6 and 211.2-212.0.
// At D=64 (same run, against 128x64/128): 128x80/128 (255 registers, no spill) 260.2-260.3 /
// 261.5-263.6 at N=4096, 290.0-290.1 / 291.4-291.6 at N=16384, but causal N=4096 238.0-238.4 /
// 233.8-233.9; 128x48/128 (232 registers) 236.1 / 262.2-263.7 / 211.9-212.8.
struct WorkgroupTile {
  uint32_t owned, streamed, workgroup, max_head_dim;
  uint32_t min_mean_keys = 0;
};
constexpr WorkgroupTile kCoopmat2ForwardTiles[] = {
    {128, 64, 128, 64},  {128, 64, 256, 128, 4096}, {64, 96, 128, 96, 1024}, {64, 80, 128, 128, 1024},
    {64, 64, 128, 128},  {128, 64, 256, 128},       {64, 32, 128, 256},      {128, 32, 256, 256},
    {32, 32, 128, 256}};

// The VK_NV_cooperative_matrix2 backward kernels (subgroup-scope matrices of flexible size):
// subgroups per workgroup, the rows each owns (16 or 32: keys in dK/dV, queries in dQ), rows of
// each streamed tile, and the largest head dim the tile is for; preferred first. dK/dV keeps its V
// rows in shared memory and stages its K rows there once (Coopmat2BackwardBytes).
// Ordered by `vkflash bench` on the H100 at N=4096, whole backward (TFLOP/s, keys x queries for
// dK/dV, queries x keys for dQ, / invocations):
//   D=128, dQ 64x32/128: dK/dV 64x32/128 188, 32x32/64 174, 32x64/64 126, 64x64/128 136 (52 KB
//         of shared memory, past the limit). With dK/dV 64x32/128: dQ 64x64/128 198,
//         128x64/256 196, 64x32/128 192, 128x32/256 188, 32x32/64 180.
//   D=64, dQ 64x32/128: dK/dV 64x64/128 185, 32x64/64 176, 64x32/128 171, 32x32/64 163. With
//         dK/dV 64x64/128: dQ 64x32/128 190, 64x64/128 188, 128x64/256 181, 32x64/64 169.
//   D=64 with 32 rows per subgroup (another device run; the table's tiles then gave 185, causal
//         175): dQ 128x32/128 200 (causal 182), 64x32/64 195 (180), 64x64/64 175 (158); dK/dV
//         128x32/128 189 (176, but spilling 112 bytes), 64x32/64 186 (174). At D=128, 32 rows of
//         a subgroup's accumulators and operands do not fit the registers.
//   D=64, dQ 128x64/128 (at dcb3d3a, one device run; its 255 registers spill 60 words, stored
//         before the loop and reloaded after it, none inside): N=4096 203.4 against 194.9 for
//         128x32/128 (causal 177.9 / 175.8), N=1024 172.8 / 165.5 (128.0 / 127.3), N=16384
//         213.3 / 211.8 (199.5 / 199.7).
//   D=128, dK/dV 64x48/128 (at a16f124, one device run; 43 KB staged, 48.5 KB with the driver's;
//         255 registers, one spilled word stored and reloaded per step): N=4096 202.2 against
//         198.5 for 64x32/128 (causal 188.5 / 186.2), N=16384 212.2 / 208.4 (206.7 / 204.0),
//         N=1024 174.3 / 172.6 (causal 137.4 / 140.1, the one point it loses). At D=64 it gave
//         197.5 against 203.1 for 64x64/128; dQ tiles of 48, 80 or 96 keys lost at both head dims.
//   D=64, dK/dV 64x128/128 (at 743ae70, two device runs, H=32; 46 KB staged, 253 registers): N=4096
//         215.4 against 206.8 for 64x64/128 (causal 190.8 / 187.0), N=16384 226.9 / 217.9 (212.1 /
//         206.3), N=1024 182.0 / 176.8 (135.6 / 135.1), N=512 149.7 / 146.4 (causal 95.9 / 96.9,
//         the one point it loses). At N=4096: 64x112/128 213.1, 64x96/128 213.3, 128x32/128 210.2,
//         128x64/128 203.6, 128x96/128 175.5. dQ other than 128x64/128: with dK/dV 64x64/128
//         (205.3) 128x32/128 198.5, 128x96/128 178.7, 128x128/128 172.0; with dK/dV 64x128/128
//         (215.4) 64x128/128 196.2, 64x64/128 194.5.
struct SubgroupTile {
  uint32_t subgroups, rows, streamed, max_head_dim;  // rows: owned rows per subgroup, 16 or 32
};
constexpr SubgroupTile kCoopmat2DkdvTiles[] = {{4, 16, 128, 64}, {4, 16, 64, 64},  {4, 16, 48, 128},
                                               {4, 16, 32, 128}, {2, 16, 32, 128}, {1, 16, 16, 128}};
constexpr SubgroupTile kCoopmat2DqTiles[] = {{4, 32, 64, 64},  {4, 32, 32, 64},  {4, 16, 64, 128},
                                             {4, 16, 32, 128}, {2, 16, 32, 128}, {1, 16, 16, 128}};

// Accumulator registers per lane grow with (row blocks x head dim): Q fragments and O in the
// forward; dK and dV (dkdv), or Q, dO and dQ (dq) in the backward. Past these, registers spill.
constexpr uint32_t kForwardMaxRowBlocksTimesDim = 256;
constexpr uint32_t kBackwardMaxHeadDim = 128;

uint32_t TileStrideBytes(uint32_t head_dim) { return (head_dim / 8 + 1) * 16; }  // odd count of uvec4

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

// Shared memory of the VK_NV_cooperative_matrix2 forward: K and V tiles of `streamed` padded rows
// (shaders/common/stage_rows.glsl). The driver may add some of its own.
uint32_t Coopmat2ForwardBytes(uint32_t head_dim, const WorkgroupTile& tile) {
  return 2 * tile.streamed * TileStrideBytes(head_dim);
}
// ...and of its backward kernels. dK/dV: its V rows, a region that holds its K rows once and then
// each step's Q and dO rows, and the step's LSE and delta. dQ: K and V rows, and the owned rows'
// LSE and delta.
uint32_t Coopmat2BackwardBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, bool dkdv) {
  const uint32_t stride = TileStrideBytes(head_dim);
  if (dkdv) return (owned + std::max(owned, 2 * streamed)) * stride + 2 * streamed * 4;
  return 2 * streamed * stride + 2 * owned * 4;
}
uint32_t ScratchBytes(uint32_t subgroups, CooperativeMatrixApi api) {
  const uint32_t coordinates = 256 * 4;
  return coordinates + (api == CooperativeMatrixApi::kKhr ? subgroups * 256 * 2 : 0);
}

// The tile VKFLASH_COOPMAT_FORWARD_TILE names, read once per process (not on every Record).
std::optional<ForwardTile> ForcedForwardTile() {
  static const std::optional<ForwardTile> forced = []() -> std::optional<ForwardTile> {
    auto text = env::Get("VKFLASH_COOPMAT_FORWARD_TILE");
    ForwardTile t{};
    if (text && std::sscanf(text->c_str(), "%ux%ux%u", &t.subgroups, &t.m_blocks, &t.block_kv) == 3 &&
        t.subgroups > 0 && t.m_blocks > 0 && t.block_kv > 0 && t.block_kv % 16 == 0) {
      return t;
    }
    return std::nullopt;
  }();
  return forced;
}

// VKFLASH_COOPMAT2_{FORWARD,DKDV,DQ}_TILE=OxSxW (owned x streamed x workgroup), read once.
std::optional<WorkgroupTile> ParseWorkgroupTile(const char* variable) {
  auto text = env::Get(variable);
  WorkgroupTile t{0, 0, 0, 256};  // a forced tile is tried at every head dim and length
  if (text && std::sscanf(text->c_str(), "%ux%ux%u", &t.owned, &t.streamed, &t.workgroup) == 3 && t.owned > 0 &&
      t.streamed > 0 && t.workgroup > 0) {
    return t;
  }
  return std::nullopt;
}
enum class Coopmat2Kernel { kForward, kDkdv, kDq };
std::optional<WorkgroupTile> ForcedCoopmat2Tile(Coopmat2Kernel kernel) {
  static const std::optional<WorkgroupTile> forced[] = {ParseWorkgroupTile("VKFLASH_COOPMAT2_FORWARD_TILE"),
                                                        ParseWorkgroupTile("VKFLASH_COOPMAT2_DKDV_TILE"),
                                                        ParseWorkgroupTile("VKFLASH_COOPMAT2_DQ_TILE")};
  return forced[static_cast<int>(kernel)];
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

// ...and of the VK_NV_cooperative_matrix2 kernels, whose row vectors or tiles are multiples of
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

Status NoTile(const AttentionParams& params) {
  return Status::Error(ErrorCode::kUnsupported,
                       "no tensor-core tile fits head dim " + std::to_string(params.shape.head_dim));
}

// The forced tile if the device can run it, else the table's first that it can (tables are in
// order of preference).
template <typename Tile, typename Fits>
std::optional<Tile> FirstTileThatFits(const std::optional<Tile>& forced, std::span<const Tile> table, const Fits& fits) {
  if (forced && fits(*forced)) return forced;
  for (const Tile& tile : table) {
    if (fits(tile)) return tile;
  }
  return std::nullopt;
}

// The first tile of a backward kernel (a forced one first) the device can run: subgroup-scope
// matrices of the listed granularity, one subgroup size (the kernels give each subgroup its rows).
Result<KernelChoice> ChooseCoopmat2BackwardTile(const DeviceInfo& device, const AttentionParams& params, bool dkdv) {
  const uint32_t head_dim = params.shape.head_dim, g = device.cooperative_matrix2_subgroup_granularity;
  auto owned_rows = [](const SubgroupTile& tile) { return tile.rows * tile.subgroups; };
  auto fits = [&](const SubgroupTile& tile) {
    return g > 0 && (tile.rows == 16 || tile.rows == 32) && tile.rows % g == 0 && tile.streamed % g == 0 &&
           head_dim % g == 0 && head_dim <= tile.max_head_dim && device.subgroup_size > 0 &&
           device.min_subgroup_size == device.max_subgroup_size &&
           tile.subgroups * device.subgroup_size <= device.max_workgroup_invocations &&
           Coopmat2BackwardBytes(head_dim, owned_rows(tile), tile.streamed, dkdv) <= device.usable_shared_memory_bytes;
  };
  // A forced OxSxW tile: W / subgroup size subgroups of O / subgroups rows each.
  std::optional<SubgroupTile> forced_tile;
  if (auto forced = ForcedCoopmat2Tile(dkdv ? Coopmat2Kernel::kDkdv : Coopmat2Kernel::kDq);
      forced && device.subgroup_size > 0 && forced->workgroup % device.subgroup_size == 0) {
    const uint32_t subgroups = forced->workgroup / device.subgroup_size;
    const SubgroupTile tile{subgroups, forced->owned / subgroups, forced->streamed, forced->max_head_dim};
    if (owned_rows(tile) == forced->owned) forced_tile = tile;
  }
  const std::span<const SubgroupTile> table = dkdv ? std::span<const SubgroupTile>(kCoopmat2DkdvTiles)
                                                   : std::span<const SubgroupTile>(kCoopmat2DqTiles);
  const std::optional<SubgroupTile> chosen = FirstTileThatFits(forced_tile, table, fits);
  if (!chosen) return NoTile(params);
  const uint32_t owned = owned_rows(*chosen);
  return Coopmat2Choice(device, dkdv ? "backward_dkdv_f16_coopmat2" : "backward_dq_f16_coopmat2",
                        dkdv ? chosen->streamed : owned, dkdv ? owned : chosen->streamed,
                        chosen->subgroups * device.subgroup_size,
                        Coopmat2BackwardBytes(head_dim, owned, chosen->streamed, dkdv), g);
}

}  // namespace

double MeanVisibleKeys(uint32_t q_len, uint32_t kv_len, bool causal) {
  if (!causal || q_len == 0) return kv_len;
  // Bottom-right alignment: query i sees keys j <= i + kv_len - q_len.
  if (kv_len >= q_len) return kv_len - (q_len - 1) / 2.0;  // row i sees i + kv_len - q_len + 1 keys
  return double(kv_len) * (kv_len + 1) / (2.0 * q_len);   // the last kv_len rows see 1..kv_len keys
}

bool CoopmatApplies(const DeviceInfo& device, const AttentionParams& params) {
  return device.cooperative_matrix != CooperativeMatrixApi::kNone && params.dtype == DataType::kFloat16 &&
         params.shape.head_dim % 16 == 0 && params.shape.head_dim <= 256;
}

uint32_t CoopmatForwardSharedBytes(uint32_t head_dim, uint32_t block_kv, uint32_t subgroups, CooperativeMatrixApi api) {
  return 2 * block_kv * TileStrideBytes(head_dim) + ScratchBytes(subgroups, api);
}

uint32_t CoopmatBackwardSharedBytes(uint32_t head_dim, uint32_t owned, uint32_t streamed, uint32_t subgroups,
                                    bool dkdv, CooperativeMatrixApi api) {
  const uint32_t rows = 2 * streamed + (dkdv ? 2 * owned : 0);
  const uint32_t row_floats = dkdv ? 2 * streamed * 4 : 0;
  return rows * TileStrideBytes(head_dim) + row_floats + ScratchBytes(subgroups, api);
}

Result<KernelChoice> ChooseCoopmatForward(const DeviceInfo& device, const AttentionParams& params) {
  const uint32_t head_dim = params.shape.head_dim;
  auto bytes = [&](const ForwardTile& tile) {
    return CoopmatForwardSharedBytes(head_dim, tile.block_kv, tile.subgroups, device.cooperative_matrix);
  };
  auto fits = [&](const ForwardTile& tile) {
    return tile.m_blocks * head_dim <= kForwardMaxRowBlocksTimesDim &&
           tile.subgroups * device.subgroup_size <= device.max_workgroup_invocations &&
           bytes(tile) <= device.usable_shared_memory_bytes;
  };
  const std::optional<ForwardTile> chosen =
      FirstTileThatFits(ForcedForwardTile(), std::span<const ForwardTile>(kForwardTiles), fits);
  if (!chosen) return NoTile(params);
  return Choice(device, "forward_f16", 16 * chosen->m_blocks * chosen->subgroups, chosen->block_kv, chosen->subgroups,
                bytes(*chosen));
}

bool Coopmat2Applies(const DeviceInfo& device, const AttentionParams& params) {
  const uint32_t granularity = device.cooperative_matrix2_granularity;
  return device.use_cooperative_matrix2 && params.dtype == DataType::kFloat16 && granularity > 0 &&
         params.shape.head_dim % granularity == 0 && params.shape.head_dim <= 256;
}

Result<KernelChoice> ChooseCoopmat2Forward(const DeviceInfo& device, const AttentionParams& params) {
  const double mean_keys = MeanVisibleKeys(params.shape.q_len, params.shape.kv_len, params.causal);
  auto fits = [&](const WorkgroupTile& tile) {
    return params.shape.head_dim <= tile.max_head_dim && mean_keys >= tile.min_mean_keys &&
           Coopmat2ForwardBytes(params.shape.head_dim, tile) <= device.usable_shared_memory_bytes &&
           tile.workgroup <= device.max_workgroup_invocations &&
           std::any_of(device.cooperative_matrix2_workgroups.begin(), device.cooperative_matrix2_workgroups.end(),
                       [&](const DeviceInfo::Coopmat2Workgroup& listed) {
                         return ForwardMatricesFit(listed, tile, params.shape.head_dim,
                                                   device.cooperative_matrix2_granularity);
                       });
  };
  const std::optional<WorkgroupTile> chosen = FirstTileThatFits(
      ForcedCoopmat2Tile(Coopmat2Kernel::kForward), std::span<const WorkgroupTile>(kCoopmat2ForwardTiles), fits);
  if (!chosen) return NoTile(params);
  return Coopmat2Choice(device, "forward_f16_coopmat2", chosen->owned, chosen->streamed, chosen->workgroup,
                        Coopmat2ForwardBytes(params.shape.head_dim, *chosen), device.cooperative_matrix2_granularity);
}

Result<BackwardKernelChoice> ChooseCoopmat2Backward(const DeviceInfo& device, const AttentionParams& params) {
  if (params.shape.head_dim > kBackwardMaxHeadDim) return NoTile(params);
  return BothBackwardKernels([&](bool dkdv) {
    return ChooseCoopmat2BackwardTile(device, params, dkdv);
  });
}

Result<BackwardKernelChoice> ChooseCoopmatBackward(const DeviceInfo& device, const AttentionParams& params) {
  const uint32_t head_dim = params.shape.head_dim;
  if (head_dim > kBackwardMaxHeadDim) return NoTile(params);
  auto choose = [&](bool dkdv) -> Result<KernelChoice> {
    auto bytes = [&](const BackwardTile& tile) {
      return CoopmatBackwardSharedBytes(head_dim, 16 * tile.subgroups, tile.streamed, tile.subgroups, dkdv,
                                        device.cooperative_matrix);
    };
    auto fits = [&](const BackwardTile& tile) {
      return tile.subgroups * device.subgroup_size <= device.max_workgroup_invocations &&
             bytes(tile) <= device.usable_shared_memory_bytes;
    };
    const std::span<const BackwardTile> table =
        dkdv ? std::span<const BackwardTile>(kDkdvTiles) : std::span<const BackwardTile>(kDqTiles);
    const std::optional<BackwardTile> chosen = FirstTileThatFits(std::optional<BackwardTile>(), table, fits);
    if (!chosen) return NoTile(params);
    const uint32_t owned = 16 * chosen->subgroups;  // each subgroup owns 16 rows
    return dkdv ? Choice(device, "backward_dkdv_f16", chosen->streamed, owned, chosen->subgroups, bytes(*chosen))
                : Choice(device, "backward_dq_f16", owned, chosen->streamed, chosen->subgroups, bytes(*chosen));
  };
  return BothBackwardKernels(choose);
}

}  // namespace vkflash::attention
