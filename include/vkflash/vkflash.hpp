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
//   scale defaults to 1/sqrt(D). causal is bottom-right aligned: row i sees key j iff j <= i + Nk - Nq;
//   a sliding window (AttentionWindow) bounds the keys around the same diagonal.
//   A row that sees no key gets O = 0 and LSE = -inf.
#pragma once

#include <vkflash/result.hpp>
#include <vulkan/vulkan.h>

#include <array>
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

VKFLASH_API size_t DataTypeSize(DataType type);
VKFLASH_API const char* DataTypeName(DataType type);  // "float32" / "float16"

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

// Where a tensor's rows are in its buffer: row n of head h in batch entry b starts at element
// b * batch + h * head + n * row of the view (elements of the call's dtype); the head dim is
// contiguous. The rows of one tensor must not overlap.
struct TensorStrides {
  uint64_t batch = 0;
  uint64_t head = 0;
  uint64_t row = 0;
};

// The memory order of the tensors that have no TensorStrides of their own. kBhsd: [B, H, N, D]
// (the default); kBshd: [B, N, H, D], flash-attn's and llama.cpp's. A ragged (cu_seqlens) tensor
// has no batch index: [H, total, D] and [total, H, D] (flash-attn's varlen layout).
enum class TensorLayout : uint32_t { kBhsd = 0, kBshd = 1 };

// The packed strides of `layout` for a tensor of `heads` x `rows` rows of `head_dim` elements per
// batch entry.
VKFLASH_API TensorStrides PackedStrides(TensorLayout layout, uint32_t heads, uint32_t rows, uint32_t head_dim);

// What to compute (forward and backward take the same parameters).
//
// Batches whose sequences differ in length (docs/design.md, "Sequences"):
// - kv_lengths (batch entries): sequence b attends to its first kv_lengths[b] keys of the
//   shape.kv_len rows K and V hold for it (a KV cache filled to different lengths). 0 gives O = 0,
//   LSE = -inf. The backward writes zero dK, dV rows past each length.
// - cu_seqlens_q / cu_seqlens_k (batch + 1 offsets each, non-decreasing, from >= 0): ragged
//   ("varlen") tensors, sequences packed end to end. Sequence b has the query rows
//   [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of Q, O, dO and dQ, and the key rows
//   [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of K, V, dK and dV; shape.q_len / kv_len are then the
//   rows those tensors hold (at least the last offset), their strides' batch entry is unused, and
//   the LSE is [q_heads, q_len]. Either may be given alone (the other tensors keep their batch
//   index), and kv_lengths with cu_seqlens_k (each at most its sequence's rows).
// A sliding window around the bottom-right aligned diagonal (docs/design.md, "What is computed"):
// query row i of a sequence sees key j iff
//   i + Nk - Nq - left <= j <= i + Nk - Nq + right
// (Nq, Nk: that sequence's query and key counts). -1 leaves a side unbounded. Mistral's and
// Gemma's local attention is {W - 1, 0} (W keys, the row's own last); causal alone is {-1, 0}.
// Key tiles outside the window are never visited: the cost grows with the window, not with Nk.
struct AttentionWindow {
  int32_t left = -1;
  int32_t right = -1;
};

// ALiBi (Press et al.): every score gets -slope * |i + Nk - Nq - j|, its distance from the
// bottom-right aligned diagonal, with float32 slopes in Forward/BackwardBuffers::alibi_slopes:
// kPerHead one per query head ([Hq]), kPerBatchHead one per batch entry and query head ([B, Hq];
// with cu_seqlens, B is the number of sequences). Calls with ALiBi take sequences of at most
// kMaxAlibiSequence queries and keys (Nq and Nk; with cu_seqlens, each sequence's); longer ones are
// refused (kUnsupported).
enum class AlibiSlopes : uint32_t { kNone = 0, kPerHead = 1, kPerBatchHead = 2 };
inline constexpr uint32_t kMaxAlibiSequence = 1u << 22;

// The element type of a mask over the scores (AttentionMask).
//   kFloat32, kFloat16: additive, a bias: s += mask[b, h, i, j]; -inf blocks the pair.
//   kBool: one byte per element (NumPy's bool): 0 blocks the pair, anything else lets it through.
enum class MaskType : uint32_t { kNone = 0, kFloat32 = 1, kFloat16 = 2, kBool = 3 };

// A mask or bias over the scores, broadcastable to [B, Hq, Nq, Nk] (as NumPy broadcasts): each of
// its four dimensions is either the call's (true) or 1 (false), contiguous in C order over the
// ones it has, in Forward/BackwardBuffers::mask. Nq and Nk are shape.q_len and shape.kv_len (a KV
// cache's capacity with kv_lengths); with cu_seqlens_q / cu_seqlens_k, the longest sequence's rows
// in Q / in K and V (the offsets' largest difference, whatever kv_lengths fills of them), and
// sequence b's query row i and key j (its own) are element [b, h, i, j]. A pair it blocks
// weighs nothing, like a pair outside the window, but as in PyTorch's masked attention its Q, K and
// V rows are still multiplied (by P = 0, dS = 0): they must be finite (docs/design.md).
struct AttentionMask {
  MaskType type = MaskType::kNone;
  bool batch = true, heads = true, rows = true, keys = true;

  // A bias (float32 or float16): the only kind with a gradient (BackwardBuffers::dbias).
  bool additive() const { return type == MaskType::kFloat32 || type == MaskType::kFloat16; }
};

// Causal masking is bottom-right aligned per sequence: the window {-1, 0}.
//
// The score of query row i and key j is modified in this order (docs/design.md):
//   s = scale * q_i . k_j;  s = softcap * tanh(s / softcap) (softcap > 0);  s -= slope * |i + Nk - Nq - j|
//   (ALiBi);  s += mask[b, h, i, j] (an additive mask; -inf, or false in a boolean one, blocks
//   the pair); then keys outside the causal / window band are masked. With sinks, each row's softmax
// denominator also holds exp(sink[h]) (a logit with no value row): O = sum_j P_j V_j with
// P_j = exp(s_j) / (sum_k exp(s_k) + exp(sink[h])), and the LSE includes the sink.
struct VKFLASH_API AttentionParams {
  AttentionShape shape;
  DataType dtype = DataType::kFloat32;
  bool causal = false;
  // Sliding window; with causal its right side must be -1 or 0 (causal bounds it at 0).
  AttentionWindow window;
  std::optional<float> scale;  // softmax scale; default 1/sqrt(head_dim)
  // Logit softcap (Gemma 2: 50): 0 is none; otherwise finite and > 0. Each distinct value is its
  // own pipeline (a specialization constant), built once and kept in the pipeline cache.
  float softcap = 0.0f;
  AlibiSlopes alibi = AlibiSlopes::kNone;
  // Attention sinks (gpt-oss): a learned float32 logit per query head in
  // Forward/BackwardBuffers::sinks ([Hq], not scaled, not softcapped) that joins every row's
  // softmax denominator. A row that sees no key then gets O = 0 and LSE = sink (to float32
  // rounding). A sink of -inf weighs nothing: the call computes what it would without sinks.
  bool sinks = false;
  // A mask or bias over the scores (AttentionMask), in Forward/BackwardBuffers::mask; the backward
  // can also return the bias's gradient (BackwardBuffers::dbias).
  AttentionMask mask;
  // Backward only. true: bit-identical gradients run after run (no float atomics), no N x N
  // buffer. false allows, where the kernel family has the kernels (today the
  // VK_NV_cooperative_matrix2 one): dQ summed with float atomics where the device has
  // VK_EXT_shader_atomic_float's shaderBufferFloat32AtomicAdd and it is the faster way (few query
  // tiles over long keys; one gradient kernel instead of two, FlashAttention-2's own default, dQ's
  // rounding then varying from run to run within the tolerances); else dS stored in the workspace
  // and multiplied by K (head dim 128, no mask, where the N x N float16 slots of all heads together
  // fit a sixteenth of the device's memory, at most maxStorageBufferRange;
  // TileOverrides::stored_ds_max_mib), bits still fixed.
  // BackwardKernelChoice::atomic_dq and ::stored_ds say which a call takes (docs/design.md).
  bool deterministic = true;

  TensorLayout layout = TensorLayout::kBhsd;
  // Strides of one tensor, instead of the packed `layout`: e.g. a slice of a larger KV cache, or
  // Q, K and V interleaved in one buffer. dQ, dK and dV have the strides of Q, K and V. The
  // tensor-core and decode kernels need strides that are multiples of 8 elements (16 bytes of
  // float16); other strides run the scalar kernels.
  std::optional<TensorStrides> q_strides, k_strides, v_strides, o_strides, d_o_strides;

  std::vector<int32_t> kv_lengths;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;

  float effective_scale() const;
  // Whether the sequences differ (kv_lengths or cu_seqlens given).
  bool has_sequences() const { return !kv_lengths.empty() || !cu_seqlens_q.empty() || !cu_seqlens_k.empty(); }
};

// Checks an AttentionParams against the contract (shape, heads, head dim, finite scale) without
// touching any device. Returns kInvalidArgument or kUnsupported with the reason.
VKFLASH_API Status ValidateAttentionParams(const AttentionParams& params);

// The (query row, key) pairs a call computes, over every batch entry and query head: the rows'
// visible keys after causal masking, the window and the sequences' lengths. FLOP counts multiply
// it (the forward's matrix products: 4 * head_dim per pair).
VKFLASH_API uint64_t VisiblePairs(const AttentionParams& params);

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
class VKFLASH_API Buffer {
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
// Sizes: packed [B, H, N, D] q, o: shape.q_elements() * DataTypeSize(dtype); k, v:
// shape.kv_elements() * size; lse: shape.lse_elements() * 4 bytes. With strides or ragged
// tensors: up to the last element the strides reach.
// `workspace`: scratch of Context::ForwardWorkspaceBytes(params) bytes, where that is not 0: a
// decode call (few query rows per KV head, long KV) splits its keys over workgroups and keeps the
// parts there, a call with sequences (AttentionParams::has_sequences) keeps their lengths there,
// a call with a mask keeps its block summary there (a dispatch it records before the kernels, with
// the barrier between them: the kernels skip tiles the mask blocks entirely), and a driver that
// ends long shader loops early (DeviceInfo::shader_loop_budget) walks long
// sequences in chunks. Without it RecordForward runs a decode call as one part (slower) where the
// loop budget allows, and fails otherwise; Forward() allocates one when it is left empty.
// A call with sequences writes their lengths into the workspace with vkCmdUpdateBuffer (the
// buffer needs VK_BUFFER_USAGE_TRANSFER_DST_BIT) between barriers it records itself. A workspace
// is written and read by the call that uses it: calls recorded with the same workspace need a
// compute-to-compute barrier between them (or one workspace each), like any two writers of one
// buffer.
// alibi_slopes (float32 [Hq] or [B, Hq], AttentionParams::alibi) and sinks (float32 [Hq],
// AttentionParams::sinks) are read only by calls that use them, and so is mask
// (AttentionParams::mask: MaskBytes(params) bytes, its element count rounded up to whole 4-byte
// words, since the kernels read it as words).
struct ForwardBuffers {
  BufferView q, k, v, o;
  BufferView lse;
  BufferView workspace;
  BufferView alibi_slopes, sinks;
  BufferView mask;
};

// The buffers of one backward call. o and lse are the forward's outputs for the same params
// (run the forward with an LSE buffer). d_o is like O; dq like Q; dk and dv like K.
// workspace: Context::BackwardWorkspaceBytes(params) bytes of scratch (rowsum(dO * O) per query
// row, the sequences' lengths and the mask's block summary as for the forward, on a driver with
// a loop budget the sums of long loops between chunks, with atomic dQ (AttentionParams::deterministic) dQ's float32 sums,
// with stored dS an N x N float16 slot per query head);
// RecordBackward needs one, Backward() allocates one when it is left empty. Two calls that share
// a workspace need a compute-to-compute barrier between them (or one workspace each).
// alibi_slopes and sinks as for the forward. dsinks (float32 [Hq]; optional, with params.sinks):
// the gradient of sum(O * dO) with respect to the sinks, -sum over batch and rows of
// P_sink * rowsum(dO * O), summed in a fixed order (deterministic); not written when empty. A
// dsinks view on a call without sinks is an error (kInvalidArgument). mask as for the forward;
// dbias (float32, the mask's shape: MaskElements(params) floats; optional, with an additive mask):
// the gradient of sum(O * dO) with respect to the bias, dS summed over the dimensions the mask
// broadcasts in a fixed order (deterministic), by a kernel of its own that recomputes the pairs'
// scores (about the cost of another forward pass, in float32 on every family).
struct BackwardBuffers {
  BufferView q, k, v, o, lse, d_o;
  BufferView dq, dk, dv;
  BufferView workspace;
  BufferView alibi_slopes, sinks;
  BufferView dsinks;
  BufferView mask, dbias;
};

// The [B, Hq, Nq, Nk] a call's mask broadcasts to (AttentionMask: Nq and Nk are the longest
// sequence's with cu_seqlens); the mask has each of these sizes, or 1.
VKFLASH_API std::array<uint32_t, 4> MaskBroadcastShape(const AttentionParams& params);
// The mask's elements (AttentionParams::mask; 0 without one) and the bytes its buffer must hold.
VKFLASH_API uint64_t MaskElements(const AttentionParams& params);
VKFLASH_API uint64_t MaskBytes(const AttentionParams& params);

// ---------------------------------------------------------------------------------------------
// Kernel tuning
// ---------------------------------------------------------------------------------------------

// For kernel tuning: tiles the tensor-core families try before their tables (ContextOptions, or
// the VKFLASH_COOPMAT_FORWARD_TILE, VKFLASH_COOPMAT2_{FORWARD,DKDV,DQ}_TILE and
// VKFLASH_DECODE_COOPMAT2_TILE variables). Empty: none. coopmat_forward is SxMxK (subgroups x
// 16-row blocks per subgroup x keys per tile); the coopmat2 ones and decode_coopmat2 (the decode
// kernel on tensor cores, for more packed query rows than the register kernel takes) OxSxW (owned
// rows x streamed rows x workgroup size). A tile the device cannot run is ignored.
struct TileOverrides {
  std::string coopmat_forward, coopmat2_forward, coopmat2_dkdv, coopmat2_dq, decode_coopmat2;
  // The scalar forward (VKFLASH_SCALAR_FORWARD_TILE): QxKxTxR, the register-tiled kernel's (query
  // rows, keys per step, invocations per row group, rows per invocation); QxKxT, the per-row
  // kernel's (query rows, keys per step, invocations per row), which then runs every call; or
  // "per-row": the per-row kernel, with its own tiles, for every call.
  std::string scalar_forward;
  // The scalar gradient kernels (VKFLASH_SCALAR_BACKWARD_TILE): "DKDV,DQ", each OxSxTxR, a
  // register-tiled kernel's (owned rows: keys for dK/dV, query rows for dQ; streamed rows per step;
  // invocations per row group; owned rows per invocation), either may be empty; or "per-row": the
  // per-row kernels for every call.
  std::string scalar_backward;
  // The decode kernels' split-K parts per (KV head, batch) (VKFLASH_DECODE_SPLITS); 0: from the
  // device's compute units and the shape.
  uint32_t decode_splits = 0;
  // How a backward call with deterministic = false sums dQ where the family has the kernels
  // (VKFLASH_NONDETERMINISTIC_DQ): "atomic" (BackwardKernelChoice::atomic_dq), "stored-ds"
  // (::stored_ds; where its workspace chunk fits), "recompute" (the deterministic kernels); empty:
  // the faster for the device and shape (measured: docs/tuning-log.md). C++ only.
  std::string nondeterministic_dq;
  // The most workspace stored dS takes, in MiB (VKFLASH_STORED_DS_MAX_MIB); 0: a sixteenth of the
  // device's largest memory heap (1 GiB where unknown); never more than maxStorageBufferRange.
  // Chosen by itself, stored dS runs only where the whole call fits; asked for ("stored-ds"),
  // larger calls run in chunks of (batch, KV head) pairs that fit, and where one pair does not,
  // the deterministic kernels run. C++ only.
  uint32_t stored_ds_max_mib = 0;
};

// Device introspection (device_info.hpp) and diagnostics (diagnostics.hpp).
struct DeviceInfo;
struct KernelChoice;
struct BackwardKernelChoice;

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
  // No float16 products in the scalar kernels even where the device has shaderFloat16 (the
  // VKFLASH_DISABLE_FLOAT16_ARITHMETIC environment variable too): every product float32, as on a
  // device without it.
  bool disable_float16_arithmetic = false;
  // Run as though the driver ended shader loops after this many iterations per invocation
  // (DeviceInfo::shader_loop_budget): long loops then run in chunks, as they must on such drivers.
  // 0: the VKFLASH_MAX_LOOP_ITERATIONS environment variable, else the device's own budget.
  uint32_t max_loop_iterations = 0;

  // Kernel family: "auto" (every family the device can run, preferred first: decode, coopmat2, KHR,
  // NV, scalar), "decode" (the decode kernels where they apply, then the rest as auto), "scalar",
  // "coopmat" (as auto, but some cooperative-matrix extension must be usable), "coopmat_nv" or
  // "coopmat_khr" (subgroup-scope kernels of that extension only, else scalar), or "coopmat2" (the
  // VK_NV_cooperative_matrix2 kernels, with subgroup-scope ones where they do not apply). Naming a
  // family leaves out the ones before it (e.g. "coopmat2" runs no decode kernel).
  // Create()/Adopt() fail with kUnsupported when the family asked for cannot run here.
  // Empty: the VKFLASH_KERNELS environment variable, else "auto".
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

  // Kernel tuning aids. pipeline_statistics (or VKFLASH_PIPELINE_STATISTICS=1; Create() only: an
  // adopted device's extensions are the engine's): on a device with
  // VK_KHR_pipeline_executable_properties, the driver's statistics of every pipeline (registers,
  // spills, shared memory) go to stderr. tile_overrides: see TileOverrides.
  bool pipeline_statistics = false;
  TileOverrides tile_overrides;
};

// What an engine enabled on its VkDevice that vkflash may use (ExternalDevice::enabled, a bitwise OR).
enum AdoptedDeviceFeature : uint32_t {
  // storageBuffer16BitAccess: needed for float16 tensors.
  kAdoptedStorageBuffer16Bit = 1u << 0,
  // VK_KHR_push_descriptor.
  kAdoptedPushDescriptor = 1u << 1,
  // VK_NV_cooperative_matrix / VK_KHR_cooperative_matrix with its cooperativeMatrix feature, and
  // shaderFloat16 and vulkanMemoryModel: the subgroup-scope tensor-core kernels may run.
  kAdoptedCooperativeMatrixNv = 1u << 2,
  kAdoptedCooperativeMatrixKhr = 1u << 3,
  // VK_NV_cooperative_matrix2 with its workgroupScope, flexibleDimensions, reductions,
  // conversions, perElementOperations and tensorAddressing features, VK_KHR_cooperative_matrix
  // (kAdoptedCooperativeMatrixKhr) and maintenance4 (api_version >= 1.3): the workgroup-scope
  // kernels may run.
  kAdoptedCooperativeMatrix2Nv = 1u << 4,
  // shaderFloat16: the scalar forward may multiply float16 tensors in float16.
  kAdoptedShaderFloat16 = 1u << 5,
  // VK_EXT_shader_atomic_float with shaderBufferFloat32AtomicAdd: backward calls with
  // deterministic = false may sum dQ with float atomics.
  kAdoptedShaderAtomicFloat32Add = 1u << 6,
};

// An engine's own Vulkan objects for Context::Adopt(). vkflash never destroys them. The device
// must have been created with a queue of `queue_family_index` that supports compute, and with
// what `enabled` names enabled.
struct ExternalDevice {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;  // used only by the synchronous helpers
  uint32_t queue_family_index = 0;
  uint32_t api_version = VK_API_VERSION_1_1;  // the instance's apiVersion (>= 1.1)
  uint32_t enabled = 0;  // AdoptedDeviceFeature flags
};

enum class PipelineCacheState {
  kNotUsed,         // no pipeline_cache_path
  kStartedEmpty,    // no file at the path yet
  kLoaded,          // the file's blob was given to the driver
  kIgnoredForeign,  // made by another device, driver or vkflash version: not trusted
  kIgnoredCorrupt,  // truncated, bad checksum or not a vkflash cache: not trusted
  kIgnoredUnreadable,  // a file that cannot be opened or read (permissions, I/O error): not used
};
VKFLASH_API const char* PipelineCacheStateName(PipelineCacheState state);

// One device, its pipelines and operators. Not thread-safe: record and call from one thread at
// a time (or guard it). Buffers it made must be destroyed before it.
class VKFLASH_API Context {
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

  // Which kernel and tiles a forward call with these params runs with here (KernelChoice:
  // device_info.hpp).
  Result<KernelChoice> ChooseForwardKernel(const AttentionParams& params) const;

  // Bytes of ForwardBuffers::workspace a forward call with these params needs here; 0 where it
  // needs none.
  Result<uint64_t> ForwardWorkspaceBytes(const AttentionParams& params) const;

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

  // Bytes of BackwardBuffers::workspace a backward call with these params needs here (at least one
  // float per query row).
  Result<uint64_t> BackwardWorkspaceBytes(const AttentionParams& params) const;

  // Which kernels and tiles a backward call with these params runs with here.
  Result<BackwardKernelChoice> ChooseBackwardKernels(const AttentionParams& params) const;

  // Records the backward pass (FlashAttention-2: P recomputed from Q, K and LSE; no N x N
  // buffer unless stored dS runs): with a mask its block summary first, a preprocess dispatch, a
  // barrier, then the dK/dV and dQ dispatches (with atomic dQ: the dK/dV dispatch, a barrier and one
  // that stores dQ; with stored dS, per chunk: the dK/dV dispatch, a barrier, the dQ one), and
  // where asked for, the sinks' and the bias's gradient kernels after a barrier. Deterministic unless
  // params.deterministic is false: no atomics, the same inputs give bit-identical gradients. The
  // caller's barriers are as for RecordForward (inputs: q, k, v, o, lse, d_o; outputs: dq, dk, dv
  // and the workspace).
  Status RecordBackward(VkCommandBuffer cmd, const AttentionParams& params, const BackwardBuffers& buffers);
  // RecordBackward on the context's queue, then waits for it.
  Status Backward(const AttentionParams& params, const BackwardBuffers& buffers);

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

 private:
  struct Impl;
  friend class Buffer;
  friend class ContextInternals;  // the engine's access for diagnostics.hpp
  explicit Context(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vkflash
