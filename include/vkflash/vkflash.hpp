// vkflash — exact FlashAttention for any Vulkan device. Public C++ API.
//
// Quick use (headless, library owns the device):
//   auto ctx = vkflash::Context::Create();             // picks the best device
//   if (!ctx.ok()) { log(ctx.status().ToString()); }
//   auto q = (*ctx)->CreateBuffer(bytes);  ... Upload ... Forward ... Download
//
// Inside an engine: Context::Adopt() takes the engine's VkInstance/VkPhysicalDevice/VkDevice/queue,
// and RecordForward() records into the engine's own command buffer.
//
// Tensor layout (the numerical contract, see docs/design.md): row-major [B, H, N, D].
//   Q: [B, Hq, Nq, D]   K, V: [B, Hkv, Nk, D]   O: like Q   LSE: [B, Hq, Nq] float32
//   Hq % Hkv == 0; query head h reads kv head h / (Hq / Hkv).
//   scale defaults to 1/sqrt(D). causal is bottom-right aligned: row i sees key j iff j <= i + Nk - Nq.
//   A row that sees no key gets O = 0 and LSE = -inf.
#pragma once

#include <vkflash/result.hpp>
#include <vulkan/vulkan.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vkflash {

// ---------------------------------------------------------------------------------------------
// Data types and shapes
// ---------------------------------------------------------------------------------------------

// Storage type of Q, K, V, O (and dO, dQ, dK, dV). Arithmetic is always float32.
enum class DataType : uint32_t { kFloat32 = 0, kFloat16 = 1 };

size_t DataTypeSize(DataType type);
const char* DataTypeName(DataType type);  // "float32" / "float16"

// Head dims the kernels accept: 1..kMaxHeadDim.
inline constexpr uint32_t kMaxHeadDim = 256;

// The sizes of one attention call. Q is [batch, q_heads, q_len, head_dim], K and V are
// [batch, kv_heads, kv_len, head_dim].
struct AttentionShape {
  uint32_t batch = 1;
  uint32_t q_heads = 1;
  uint32_t kv_heads = 1;
  uint32_t q_len = 0;
  uint32_t kv_len = 0;
  uint32_t head_dim = 0;

  // Element counts of Q (and O), of K (and V), and of the LSE. They saturate at UINT64_MAX
  // where the product does not fit (ValidateAttentionParams refuses such shapes).
  uint64_t q_elements() const { return Product({batch, q_heads, q_len, head_dim}); }
  uint64_t kv_elements() const { return Product({batch, kv_heads, kv_len, head_dim}); }
  uint64_t lse_elements() const { return Product({batch, q_heads, q_len, 1}); }

 private:
  static uint64_t Product(std::initializer_list<uint32_t> factors) {
    uint64_t product = 1;
    for (uint32_t f : factors) {
      if (f == 0) return 0;
      if (product > UINT64_MAX / f) product = UINT64_MAX;
      else if (product != UINT64_MAX) product *= f;
    }
    return product;
  }
};

// What to compute (forward and backward take the same parameters).
struct AttentionParams {
  AttentionShape shape;
  DataType dtype = DataType::kFloat32;
  bool causal = false;
  std::optional<float> scale;  // softmax scale; default 1/sqrt(head_dim)

  float effective_scale() const;
};

// Checks an AttentionParams against the contract (shape, heads, head dim, finite scale) without
// touching any device. Returns kInvalidArgument or kUnsupported with the reason.
Status ValidateAttentionParams(const AttentionParams& params);

// ---------------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------------

// A byte range of a VkBuffer. The library never owns, frees or keeps it past the call, except
// for descriptor sets on devices without push descriptors (see Context::ForgetBuffer).
// The buffer needs VK_BUFFER_USAGE_STORAGE_BUFFER_BIT (and TRANSFER_SRC/DST for Upload/Download);
// offset must be a multiple of minStorageBufferOffsetAlignment.
struct BufferView {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;

  bool empty() const { return buffer == VK_NULL_HANDLE; }
};

class Context;

// A device-local buffer owned by vkflash (storage + transfer usage). Move-only; frees its memory
// when destroyed. It must not outlive the Context that made it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  BufferView view() const { return {buffer_, 0, size_}; }
  VkBuffer handle() const { return buffer_; }
  VkDeviceSize size() const { return size_; }

 private:
  friend class Context;
  void Release();

  Context* owner_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
};

// The buffers of one forward call. `lse` may be left empty: the LSE is then not written.
// Sizes: q, o: shape.q_elements() * DataTypeSize(dtype); k, v: shape.kv_elements() * size;
// lse: shape.lse_elements() * 4 bytes.
// `stats` (optional, for visualizing the algorithm; empty in normal use): an instrumented variant
// of the kernel then writes, for every query row i and every key tile t it visits, 5 floats at
// float index ((((b * Hq + h) * Nq + i) * T + t) * 5), T = ceil(Nk / block_kv): the running max m
// (natural log units), the running sum l, the rescale factor exp(m_old - m_new), the row's max
// score in the tile, and the row's sum of exp(S - m) over the tile. Tiles a row never visits
// (causal) are not written. Size: ForwardStatsBytes(). Only the scalar kernel is instrumented: a
// call with stats runs it, whatever ChooseForwardKernel() says for the plain call.
// `workspace`: scratch of Context::ForwardWorkspaceBytes(params) bytes, where that is not 0 (it is
// 0 on most devices; a driver that ends long shader loops early, see
// DeviceInfo::shader_loop_budget, needs one for long sequences). RecordForward fails without it
// then; Forward() allocates one when it is left empty. A workspace is written and read by the
// call that uses it: calls recorded with the same workspace need a compute-to-compute barrier
// between them (or one workspace each), like any two writers of one buffer.
struct ForwardBuffers {
  BufferView q, k, v, o;
  BufferView lse;
  BufferView stats;
  BufferView workspace;
};

// The buffers of one backward call. o and lse are the forward's outputs for the same params
// (run the forward with an LSE buffer). d_o is like O; dq like Q; dk and dv like K.
// workspace: Context::BackwardWorkspaceBytes(params) bytes of scratch (rowsum(dO * O) per query
// row, and on a driver with a loop budget the sums of long loops between chunks);
// RecordBackward needs one, Backward() allocates one when it is left empty. Two calls that share
// a workspace need a compute-to-compute barrier between them (or one workspace each).
struct BackwardBuffers {
  BufferView q, k, v, o, lse, d_o;
  BufferView dq, dk, dv;
  BufferView workspace;
};

// ---------------------------------------------------------------------------------------------
// Devices and kernels
// ---------------------------------------------------------------------------------------------

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
  bool storage_buffer_16bit = false;         // storageBuffer16BitAccess (float16 tensors)
  bool shader_float16 = false;
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
  // The same list's subgroup-scope float16 x float16 + float32 entries (the backward kernels'
  // matrices): their largest M/N/K granularity, 0 if there is none.
  uint32_t cooperative_matrix2_subgroup_granularity = 0;
  float timestamp_period_ns = 0.0f;          // 0: no compute timestamps
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
  // Which extension the tensor-core kernels use (kNone: the scalar kernels run everywhere). The
  // note says why none when the device has one (disabled by a knob, the layout probe failed), or
  // the accumulator layout the probe found.
  CooperativeMatrixApi cooperative_matrix = CooperativeMatrixApi::kNone;
  std::string cooperative_matrix_note;
  // The VK_NV_cooperative_matrix2 kernels run where they apply (float16, head dim a multiple of
  // the granularity, up to 256 forward and 128 backward); elsewhere the `cooperative_matrix`
  // kernels, then the scalar ones.
  bool use_cooperative_matrix2 = false;
};

const char* DeviceTypeName(VkPhysicalDeviceType type);
const char* CooperativeMatrixApiName(CooperativeMatrixApi api);

// The kernel and tiles chosen for a AttentionParams on this context's device.
struct KernelChoice {
  std::string kernel;              // e.g. "forward_f16_subgroup", "forward_f16_coopmat_nv"
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
};

// Bytes of ForwardBuffers::stats for `shape` with the kernel `choice` (its block_kv): take the
// choice from ChooseForwardKernel(params, /*with_stats=*/true).
uint64_t ForwardStatsBytes(const AttentionShape& shape, const KernelChoice& choice);

// Bytes of the scores scratch of the naive baseline (Context::RecordNaiveForward): Nq * Nk floats.
inline uint64_t NaiveScoresBytes(const AttentionShape& shape) { return uint64_t(shape.q_len) * shape.kv_len * 4; }

// Lists the Vulkan devices with their capabilities (no device is created).
Result<std::vector<DeviceInfo>> EnumerateDevices();

// The index (into EnumerateDevices()) of the device Context::Create would use for `selector`
// (an index or a name substring; empty: VKFLASH_DEVICE, else the best device). No device is created.
Result<uint32_t> SelectDeviceIndex(const std::string& selector = "");

// ---------------------------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------------------------

enum class MessageSeverity { kInfo, kWarning, kError };

struct ContextOptions {
  // Device choice: an index into EnumerateDevices(), or a case-insensitive substring of its name.
  // Empty: the VKFLASH_DEVICE environment variable, else the best device (discrete > integrated >
  // virtual > CPU). Ignored by Adopt().
  std::string device_selector;

  // Use less than the device offers, so that mobile-sized configurations can run anywhere.
  // 0 / false: the VKFLASH_MAX_SHARED_BYTES, VKFLASH_DISABLE_SUBGROUP_OPS and
  // VKFLASH_DISABLE_PUSH_DESCRIPTORS environment variables decide (unset: the device's limits).
  uint32_t max_shared_bytes = 0;
  bool disable_subgroup_ops = false;
  bool disable_push_descriptors = false;
  // Run as though the driver ended shader loops after this many iterations per invocation
  // (DeviceInfo::shader_loop_budget): long loops then run in chunks, as they must on such drivers.
  // 0: the VKFLASH_MAX_LOOP_ITERATIONS environment variable, else the device's own budget.
  uint32_t max_loop_iterations = 0;

  // Kernel family: "auto" (tensor cores where the device has them, else scalar), "scalar",
  // "coopmat" (any cooperative-matrix extension), "coopmat_nv" or "coopmat_khr" (subgroup-scope
  // kernels of that extension only), or "coopmat2" (the VK_NV_cooperative_matrix2 kernels, with
  // subgroup-scope ones where they do not apply). "auto" and "coopmat" prefer coopmat2, then NV, then
  // KHR. Create()/Adopt() fail with kUnsupported when the family asked for cannot run here. Empty: the VKFLASH_KERNELS
  // environment variable, else "auto".
  std::string kernels;

  // Enables VK_LAYER_KHRONOS_validation with synchronization validation (Create() only; fails
  // with kUnsupported if the layer is missing). Messages go to `message_callback`.
  bool enable_validation = false;
  std::function<void(MessageSeverity, const std::string&)> message_callback;

  // Pipeline cache file: loaded by Create()/Adopt() if present (a blob from another
  // device/driver, a corrupt one, or a file that cannot be read is ignored: see
  // Context::pipeline_cache_state()), saved when the Context is destroyed. A directory at the
  // path fails Create()/Adopt() with kInvalidArgument.
  std::string pipeline_cache_path;
};

// An engine's own Vulkan objects for Context::Adopt(). vkflash never destroys them. The device
// must have been created with a queue of `queue_family_index` that supports compute, and with
// the features below enabled where the flags say so.
struct ExternalDevice {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;  // used only by the synchronous helpers
  uint32_t queue_family_index = 0;
  uint32_t api_version = VK_API_VERSION_1_1;  // the instance's apiVersion (>= 1.1)
  bool storage_buffer_16bit_access_enabled = false;  // needed for float16 tensors
  bool push_descriptor_enabled = false;              // VK_KHR_push_descriptor enabled
  // VK_NV_cooperative_matrix / VK_KHR_cooperative_matrix enabled with its cooperativeMatrix
  // feature, and shaderFloat16 and vulkanMemoryModel enabled: the tensor-core kernels may run.
  bool cooperative_matrix_nv_enabled = false;
  bool cooperative_matrix_khr_enabled = false;
  // VK_NV_cooperative_matrix2 enabled with its workgroupScope, flexibleDimensions, reductions,
  // conversions, perElementOperations and tensorAddressing features, VK_KHR_cooperative_matrix
  // enabled too, and maintenance4 (api_version >= 1.3): the workgroup-scope kernels may run.
  bool cooperative_matrix2_nv_enabled = false;
};

enum class PipelineCacheState {
  kNotUsed,         // no pipeline_cache_path
  kStartedEmpty,    // no file at the path yet
  kLoaded,          // the file's blob was given to the driver
  kIgnoredForeign,  // made by another device, driver or vkflash version: not trusted
  kIgnoredCorrupt,  // truncated, bad checksum or not a vkflash cache: not trusted
  kIgnoredUnreadable,  // a file that cannot be opened or read (permissions, I/O error): not used
};
const char* PipelineCacheStateName(PipelineCacheState state);

// One device, its pipelines and operators. Not thread-safe: record and call from one thread at
// a time (or guard it). Buffers it made must be destroyed before it.
class Context {
 public:
  static Result<std::unique_ptr<Context>> Create(const ContextOptions& options = {});
  static Result<std::unique_ptr<Context>> Adopt(const ExternalDevice& device,
                                                const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& device_info() const;
  VkDevice device() const;

  // Device-local storage buffer of `bytes` (> 0) bytes.
  Result<Buffer> CreateBuffer(VkDeviceSize bytes);
  // Copies through a staging buffer and waits. `bytes` must fit in the view.
  Status Upload(const BufferView& dst, const void* src, size_t bytes);
  Status Download(const BufferView& src, void* dst, size_t bytes);

  // Which kernel and tiles a forward call with these params runs with here (with_stats: a call
  // that also fills ForwardBuffers::stats, which runs the instrumented scalar kernel).
  Result<KernelChoice> ChooseForwardKernel(const AttentionParams& params, bool with_stats = false) const;

  // Bytes of ForwardBuffers::workspace a forward call with these params needs here (with_stats:
  // a call that also fills ForwardBuffers::stats); 0 where it needs none.
  Result<uint64_t> ForwardWorkspaceBytes(const AttentionParams& params, bool with_stats = false) const;

  // Records the forward pass into `cmd` (in the recording state, on a queue family with compute).
  // Barriers: the caller makes prior writes to q/k/v visible to COMPUTE_SHADER reads before this
  // call, and makes the compute-shader writes to o/lse available to its consumers after it
  // (srcStage COMPUTE_SHADER, srcAccess SHADER_WRITE). Binds its own pipeline and descriptors:
  // re-bind yours afterwards. Buffers must stay alive until the command buffer completes.
  Status RecordForward(VkCommandBuffer cmd, const AttentionParams& params,
                       const ForwardBuffers& buffers);
  // RecordForward on the context's queue, then waits for it (allocating the workspace, if one is
  // needed and buffers.workspace is empty).
  Status Forward(const AttentionParams& params, const ForwardBuffers& buffers);

  // The naive baseline, not FlashAttention: S = scale Q K^T into `scores` (NaiveScoresBytes),
  // softmax in place, O = P V, one (batch, head) after another: O(N^2) memory traffic. For
  // benchmarks and cross-checks; writes O only (buffers.lse and .stats are ignored). Needs kv_len > 0.
  // Barriers as for RecordForward; `scores` is both written and read.
  Status RecordNaiveForward(VkCommandBuffer cmd, const AttentionParams& params, const ForwardBuffers& buffers,
                            const BufferView& scores);

  // Bytes of BackwardBuffers::workspace a backward call with these params needs here (at least one
  // float per query row).
  Result<uint64_t> BackwardWorkspaceBytes(const AttentionParams& params) const;

  // Which kernels and tiles a backward call with these params runs with here.
  Result<BackwardKernelChoice> ChooseBackwardKernels(const AttentionParams& params) const;

  // Records the backward pass (FlashAttention-2: P recomputed from Q, K and LSE; no N x N
  // buffer): a preprocess dispatch, a barrier, then the dK/dV and dQ dispatches. Deterministic:
  // no atomics, the same inputs give bit-identical gradients. The caller's barriers are as for
  // RecordForward (inputs: q, k, v, o, lse, d_o; outputs: dq, dk, dv and the workspace).
  Status RecordBackward(VkCommandBuffer cmd, const AttentionParams& params, const BackwardBuffers& buffers);
  // RecordBackward on the context's queue, then waits for it.
  Status Backward(const AttentionParams& params, const BackwardBuffers& buffers);

  // For benchmarks: records `record` `runs` times into one submission on the context's queue,
  // each run between timestamp queries and followed by a full barrier, and returns each run's
  // GPU time in milliseconds. kUnsupported where the queue has no timestamps.
  Result<std::vector<double>> MeasureGpuTime(const std::function<Status(VkCommandBuffer)>& record, uint32_t runs);

  // Saves the pipeline cache (to `path`, or to options.pipeline_cache_path when empty).
  Status SavePipelineCache(const std::string& path = "");
  PipelineCacheState pipeline_cache_state() const;
  size_t pipeline_count() const;  // pipelines created so far (one per kernel variant)

  // Bytes of device buffers vkflash itself holds now (CreateBuffer's, backward workspaces,
  // staging), and the most it held since the last ResetPeakAllocatedBytes(). Caller-owned
  // buffers are not counted.
  uint64_t allocated_bytes() const;
  uint64_t peak_allocated_bytes() const;
  void ResetPeakAllocatedBytes();

  // On devices without push descriptors, vkflash keeps descriptor sets per buffer binding. Call
  // this before destroying a caller-owned VkBuffer that was passed in (when nothing recorded
  // with it is still pending). A no-op with push descriptors.
  void ForgetBuffer(VkBuffer buffer);

  struct Impl;

 private:
  friend class Buffer;
  explicit Context(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vkflash
