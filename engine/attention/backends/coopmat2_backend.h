// The VK_NV_cooperative_matrix2 family (shaders/coopmat2/): the forward on workgroup-scope
// matrices, whose row reductions and softmax bookkeeping the driver does; the backward kernels on
// subgroup-scope matrices of flexible size. Tiles are multiples of the granularities the device
// lists (DeviceInfo::cooperative_matrix2_*).
#pragma once

#include "attention/backends/kernel_backend.h"
#include "attention/key_band.h"

namespace vkflash::attention {

class Coopmat2Backend final : public KernelBackend {
 public:
  const char* name() const override { return "coopmat2"; }
  std::span<const std::string_view> variants() const override;
  std::string WhyUnusable(const DeviceInfo& device, std::string_view variant) const override;
  // DeviceInfo::use_cooperative_matrix2.
  void Use(DeviceInfo* device, std::string_view) const override { device->use_cooperative_matrix2 = true; }
  void Unuse(DeviceInfo* device) const override { device->use_cooperative_matrix2 = false; }
  bool Used(const DeviceInfo& device) const override { return device.use_cooperative_matrix2; }
  bool uses_tensor_cores() const override { return true; }
  // The Context uses it (DeviceInfo::use_cooperative_matrix2), float16 tensors, head dim a
  // multiple of the granularity up to 256 (ChooseBackward: up to 128).
  bool Applies(const DeviceInfo& device, const AttentionParams& params) const override;
  // The forward: owned rows x streamed rows x workgroup size from a table, at a workgroup size the
  // device lists for workgroup-scope matrices, whose staged K and V rows fit the usable shared
  // memory; some tiles only for long rows (MeanVisibleKeys). ContextOptions::tile_overrides.coopmat2_
  // forward (OxSxW) is tried first.
  Result<KernelChoice> ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                     const TileOverrides& overrides) const override;
  // The backward: subgroups (16 or 32 owned rows each) x streamed rows from a table, at the
  // granularity of the device's subgroup-scope matrices and a single subgroup size, whose shared
  // rows fit. tile_overrides.coopmat2_dkdv / _dq (OxSxW; O / (W / subgroup size) rows per
  // subgroup, 16 or 32) are tried first.
  Result<BackwardKernelChoice> ChooseBackward(const DeviceInfo& device, const AttentionParams& params,
                                              const TileOverrides& overrides) const override;
  // Their subgroup size and the columns of their row-vector matrices (the granularity).
  void SetSpecConstants(const KernelChoice& choice, const CoopmatLayout& layout, SpecConstants* spec) const override;
};

// The decode family's kernel for more packed query rows than its registers hold
// (decode/attention_forward_decode_coopmat2.comp): owned rows >= `rows`, from a table of
// workgroup-scope tiles the device lists; tile_overrides.decode_coopmat2 (OxSxW) is tried first.
// The caller checks that the Context uses this family's kernels (DeviceInfo::use_cooperative_matrix2).
Result<KernelChoice> ChooseCoopmat2DecodeTile(const DeviceInfo& device, uint32_t head_dim, uint32_t rows,
                                              const TileOverrides& overrides);

// Whether a backward call that allows atomic dQ (AttentionParams::deterministic = false) runs it
// rather than the deterministic dQ kernel `dq`: only where that kernel's workgroups (at least one)
// would fill at most half the compute units. Its float atomics (one per dQ element per key tile,
// of 64 keys at D = 64 and 128) are the slower way elsewhere: on the H100 (132 SMs), N = 4096 at
// half the deterministic speed (D = 64 and 128), Nq = 256 over 32k keys with 32 heads (128 dQ
// workgroups) 0.76x, but Nq = 128 over 16k keys (64 workgroups) about 1.2x at D = 128 and 1.6x at
// D = 64 (docs/tuning-log.md).
bool AtomicDqPays(const DeviceInfo& device, const AttentionParams& params, const KernelChoice& dq);

// Stored dS (BackwardKernelChoice::stored_ds): the workspace bytes of the dS^T slots of one
// (batch, KV head) pair, its query heads' (shaders/coopmat2/stored_ds.glsl's layout)...
uint64_t StoredDsPairBytes(const AttentionShape& shape);
// ...and the pairs a chunk of the dK/dV and dQ dispatches takes: as many as fit `max_mib`
// (TileOverrides::stored_ds_max_mib; 0: StoredDsDefaultBytes), the device's maxStorageBufferRange
// and its workgroup counts, spread evenly over the fewest chunks; 0 where not even one pair fits.
uint32_t StoredDsChunkPairs(const DeviceInfo& device, const AttentionShape& shape, uint32_t max_mib);
// The default budget: a sixteenth of the largest device-local heap (5 GB on an 80 GB H100, where
// maxStorageBufferRange then caps it at 4 GiB; 512 MiB on an 8 GiB card), 1 GiB where the heap is
// unknown.
uint64_t StoredDsDefaultBytes(const DeviceInfo& device);
// Whether stored dS can run a call at all (what nondeterministic_dq = "stored-ds" needs): no mask
// (the two kernels would skip different closed tiles), queries and keys, and at least one (batch,
// KV head) pair within the budget...
bool StoredDsRuns(const DeviceInfo& device, const AttentionParams& params, uint32_t max_mib);
// ...and whether a backward call with deterministic = false that does not take atomic dQ stores
// dS unless TileOverrides::nondeterministic_dq says otherwise: where it runs, at a head dim of at
// least 128 (the backward's tiles stop at 128: so D = 128), with every (batch, KV head) pair in one
// chunk (H100: faster at D = 128 in one chunk, slower at D = 64 and in chunks; docs/tuning-log.md,
// "stored dS in the coopmat2 backward").
bool StoredDsPays(const DeviceInfo& device, const AttentionParams& params, uint32_t max_mib);

// Keys a query row sees, on average over the rows (kv_len without a band; for 0 rows too).
double MeanVisibleKeys(uint32_t q_len, uint32_t kv_len, const KeyBand& band);

}  // namespace vkflash::attention
