// vkflash device introspection: what the capabilities probe found on a device, which kernel
// families and tiles vkflash uses there, and the device list. Not needed to run attention.
#pragma once

#include <vkflash/vkflash.hpp>

#include <string>
#include <vector>

namespace vkflash {

// The cooperative-matrix (tensor-core) extension a kernel is built for. kNv and kKhr are
// subgroup-scope matrices; kNv2 is VK_NV_cooperative_matrix2's matrices of flexible size with
// tensor addressing, per-element operations and conversions (workgroup scope in the forward kernel,
// subgroup scope in the backward's gradient kernels).
enum class CooperativeMatrixApi { kNone, kNv, kKhr, kNv2 };

// What the capabilities probe found, and what vkflash will use after the portability knobs.
struct DeviceInfo {
  uint32_t index = 0;  // position in vkEnumeratePhysicalDevices
  std::string name;
  std::string driver;  // driver name and info, where the device reports them
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t vendor_id = 0, device_id = 0, api_version = 0, driver_version = 0;
  uint8_t pipeline_cache_uuid[VK_UUID_SIZE] = {};

  // Device limits and features as reported.
  uint32_t shared_memory_bytes = 0;         // maxComputeSharedMemorySize
  uint32_t max_workgroup_invocations = 0;   // maxComputeWorkGroupInvocations
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint64_t max_storage_buffer_range = 0;
  uint64_t max_buffer_size = 0;  // maxBufferSize (Vulkan 1.3); 0 where the device does not report one
  uint64_t min_storage_buffer_offset_alignment = 0;
  uint32_t subgroup_size = 0, min_subgroup_size = 0, max_subgroup_size = 0;
  bool subgroup_shuffle_in_compute = false;  // SHUFFLE ops supported in compute shaders
  bool subgroup_vote_in_compute = false;     // VOTE ops supported in compute shaders
  bool storage_buffer_16bit = false;         // storageBuffer16BitAccess (float16 tensors)
  bool shader_float16 = false;
  // VK_EXT_shader_atomic_float's shaderBufferFloat32AtomicAdd: atomic float32 adds to storage buffers.
  bool buffer_float32_atomic_add = false;
  bool push_descriptor = false;              // VK_KHR_push_descriptor
  bool nv_cooperative_matrix = false;   // VK_NV_cooperative_matrix is offered
  bool khr_cooperative_matrix = false;  // VK_KHR_cooperative_matrix is offered
  // The extension can run vkflash's tensor-core kernels: 16x16x16 float16 x float16 + float32
  // matrices at subgroup scope, with shaderFloat16, vulkanMemoryModel, 16-bit storage, subgroup
  // shuffles, and a single subgroup size (Vulkan 1.2 or newer).
  bool nv_cooperative_matrix_f16 = false;
  bool khr_cooperative_matrix_f16 = false;
  bool nv_cooperative_matrix2 = false;  // VK_NV_cooperative_matrix2 is offered
  // It can run vkflash's workgroup-scope kernels: Vulkan 1.3 with maintenance4, the workgroup-scope,
  // flexible-dimension, reduction, conversion, per-element and tensor-addressing features,
  // VK_KHR_cooperative_matrix's cooperativeMatrix, and float16 x float16 + float32 listed by
  // vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV for these workgroup sizes,
  // with tile dimensions that are multiples of the granularity.
  bool nv_cooperative_matrix2_f16 = false;
  // A workgroup size at which the device lists those matrices, and the granularities their M, N
  // and K must be multiples of there.
  struct Coopmat2Workgroup {
    uint32_t invocations = 0;
    uint32_t m_granularity = 0, n_granularity = 0, k_granularity = 0;
  };
  std::vector<Coopmat2Workgroup> cooperative_matrix2_workgroups;
  uint32_t cooperative_matrix2_granularity = 0;  // largest M/N/K granularity of those entries
  // cooperativeMatrixWorkgroupScopeReservedSharedMemory: shared memory the driver keeps for a
  // kernel with workgroup-scope matrices, out of maxComputeSharedMemorySize.
  uint32_t cooperative_matrix2_reserved_shared_memory = 0;
  // The same list's subgroup-scope float16 x float16 + float32 entries (the backward kernels'
  // matrices): their largest M/N/K granularity, 0 if there is none.
  uint32_t cooperative_matrix2_subgroup_granularity = 0;
  float timestamp_period_ns = 0.0f;          // 0: no compute timestamps
  // Streaming multiprocessors / compute units, where the device reports them (VK_NV_shader_sm_builtins,
  // VK_AMD_shader_core_properties); 0: unknown.
  uint32_t compute_units = 0;
  // The largest device-local memory heap, in bytes (what stored dS's default budget is a part of).
  uint64_t device_local_bytes = 0;
  // Loop iterations one shader invocation may run in all before the driver ends its loops early
  // (lavapipe of Mesa 22.3, Debian bookworm's: 65535; Mesa 25.0 has none), measured when a
  // Context starts; 0: no such budget below 2^20 iterations (0 also before a Context measured
  // it, e.g. in EnumerateDevices()).
  // Where there is one, the scalar kernels run long loops in chunks that stay inside it, and the
  // tensor-core kernels are not used.
  uint32_t shader_loop_budget = 0;

  // What vkflash uses, after ContextOptions / VKFLASH_* limits are applied.
  uint32_t usable_shared_memory_bytes = 0;
  bool use_subgroup_ops = false;
  bool use_push_descriptors = false;
  // shaderFloat16 is enabled on the Context's device: the register-tiled scalar forward multiplies
  // float16 tensors in float16 (its sums stay float32; scalar/register_tile.glsl).
  bool use_float16_arithmetic = false;
  // buffer_float32_atomic_add is enabled on the Context's device: backward calls with
  // deterministic = false may sum dQ with float atomics (AttentionParams::deterministic).
  bool use_float32_atomic_add = false;
  // Which extension the tensor-core kernels use (kNone: the scalar kernels run everywhere). The
  // note says why none when the device has one (disabled by a knob, the layout probe failed), or
  // the accumulator layout the probe found.
  CooperativeMatrixApi cooperative_matrix = CooperativeMatrixApi::kNone;
  std::string cooperative_matrix_note;
  // With cooperative_matrix == kKhr: the layout probe found the float16 A operand laid out like
  // the float32 accumulator, so the kernels turn P into an A operand by an element copy in
  // registers; otherwise through a scratch in shared memory, and `auto` prefers the NV kernels
  // where they run.
  bool cooperative_matrix_a_copy = false;
  // The VK_NV_cooperative_matrix2 kernels run where they apply (float16, head dim a multiple of
  // the granularity, up to 256 forward and 128 backward); elsewhere the `cooperative_matrix`
  // kernels, then the scalar ones.
  bool use_cooperative_matrix2 = false;
  // The decode kernels (float16, few query rows per KV head: shaders/decode/) run where they apply.
  bool use_decode_kernels = false;
};

VKFLASH_API const char* DeviceTypeName(VkPhysicalDeviceType type);
VKFLASH_API const char* CooperativeMatrixApiName(CooperativeMatrixApi api);

// The kernel and tiles chosen for a AttentionParams on this context's device.
struct KernelChoice {
  std::string kernel;              // e.g. "forward_f16_subgroup", "forward_f16_coopmat_nv"
  std::string family;              // the kernel family that chose it: "decode", "coopmat2", "coopmat" or "scalar"
  uint32_t block_q = 0;            // Br: query rows per workgroup
  uint32_t block_kv = 0;           // Bc: key/value rows per shared-memory tile
  uint32_t threads_per_row = 0;    // invocations sharing one query row
  uint32_t workgroup_size = 0;
  bool subgroup_reductions = false;  // false: shared-memory reductions
  uint32_t shared_memory_bytes = 0;  // the kernel's own; the driver may add some to kNv2 kernels
  // Tensor-core kernels: the extension, and the subgroup size they run with (threads_per_row is 0).
  CooperativeMatrixApi cooperative_matrix = CooperativeMatrixApi::kNone;
  uint32_t subgroup_size = 0;
  // kNv2 kernels: the device's matrix-dimension granularity at their scope (the forward:
  // cooperative_matrix2_granularity, the width of its row-vector matrices; the backward kernels:
  // cooperative_matrix2_subgroup_granularity).
  uint32_t matrix_granularity = 0;
};

// The backward pass runs three kernels; the two gradient kernels have tiles of their own.
// dkdv: block_kv key rows per workgroup, query tiles of block_q streamed through.
// dq: block_q query rows per workgroup, key tiles of block_kv streamed through.
struct BackwardKernelChoice {
  KernelChoice dkdv;
  KernelChoice dq;
  // deterministic = false, where the family has the kernel and the device float atomics: dkdv
  // also sums dQ with float atomics into the workspace, and dq only scales and stores those sums.
  bool atomic_dq = false;
  // deterministic = false, where the family has the kernels and the workspace holds it (the
  // VK_NV_cooperative_matrix2 family): dkdv also stores dS (float16, an N x N slot per query head,
  // in chunks of (batch, KV head) pairs), and dq is dS K, one matrix product where the dQ kernel
  // runs three. Deterministic too; Context::BackwardWorkspaceBytes counts the slots.
  bool stored_ds = false;
};

// The values ContextOptions::kernels takes: "auto", "coopmat", then each kernel family's names,
// preferred family first ("decode", "coopmat2", "coopmat_khr", "coopmat_nv", "scalar").
VKFLASH_API std::vector<std::string> KernelsOptionValues();

// Lists the Vulkan devices with their capabilities (no device is created).
VKFLASH_API Result<std::vector<DeviceInfo>> EnumerateDevices();

// The index (into EnumerateDevices()) of the device Context::Create would use for `selector`
// (an index or a name substring; empty: VKFLASH_DEVICE, else the best device). No device is created.
VKFLASH_API Result<uint32_t> SelectDeviceIndex(const std::string& selector = "");

}  // namespace vkflash
