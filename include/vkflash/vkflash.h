/* vkflash: exact FlashAttention for any Vulkan device. The C API (C99 or newer, and C++).
 *
 * A thin layer over the C++ API (vkflash.hpp, device_info.hpp, diagnostics.hpp): the same calls,
 * the same contract. The numerical contract (layouts, causal alignment, LSE, masks, tolerances,
 * determinism) is docs/design.md and the comments of vkflash.hpp; this header says what the C
 * spelling adds: ownership, struct versions and errors.
 *
 * Conventions
 * - Handles are opaque pointers (VkfContext, VkfBuffer); NULL is never a valid handle.
 * - Functions that can fail return a VkfResult: VKF_SUCCESS (0) or a negative error. They never
 *   crash on a NULL pointer or a bad struct_size: they return VKF_ERROR_INVALID_ARGUMENT. Nothing
 *   is thrown across the ABI; a host allocation failure is VKF_ERROR_OUT_OF_MEMORY.
 * - Every function that returns a VkfResult sets this thread's last error: the message of its
 *   failure (vkfGetLastErrorMessage), or "" when it succeeds.
 * - Structs passed in or out start with `uint32_t struct_size`, which the caller sets to
 *   sizeof(the struct). Later versions of vkflash only append fields, so:
 *     - a struct_size of 0, below this first version's size, or implausibly large (over 64 KiB) is
 *       VKF_ERROR_INVALID_ARGUMENT;
 *     - the library reads only the fields struct_size covers (a caller built against an older
 *       header gets the defaults for the rest) and writes only those of an output struct;
 *     - a struct larger than this library knows (a newer header) is accepted if the fields this
 *       library does not know are zero, else VKF_ERROR_UNSUPPORTED (it cannot honour them).
 *   Zero is every field's default (the C++ API's defaults), so zero-initialise structs:
 *     VkfAttentionParams params = {.struct_size = sizeof(VkfAttentionParams)};   (C99)
 *     VkfAttentionParams params{};  params.struct_size = sizeof(params);          (C++)
 *   Small value structs (VkfAttentionShape, VkfBufferView, ...) have no struct_size: they never grow.
 * - Booleans are VkBool32 (VK_TRUE / VK_FALSE). Strings passed in are UTF-8, NUL-terminated and
 *   copied (they need not outlive the call); NULL is "". Strings passed out are fixed char arrays,
 *   NUL-terminated, truncated at a UTF-8 character boundary where longer.
 * - A VkfContext is not thread-safe: call it from one thread at a time. Different contexts, and
 *   the functions without a context, may be called from any thread.
 */
#ifndef VKFLASH_VKFLASH_H_
#define VKFLASH_VKFLASH_H_

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include <vkflash/export.h>
#include <vkflash/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Results and errors                                                                          */
/* ------------------------------------------------------------------------------------------ */

/* vkflash::ErrorCode, C style: 0 success, negative errors. */
typedef enum VkfResult {
  VKF_SUCCESS = 0,
  VKF_ERROR_INVALID_ARGUMENT = -1, /* outside the contract: NULL, struct_size, shape, dtype, buffer size */
  VKF_ERROR_UNSUPPORTED = -2,      /* valid, but this device or configuration cannot run it */
  VKF_ERROR_DEVICE_NOT_FOUND = -3, /* no Vulkan device, or none matching the selector */
  VKF_ERROR_VULKAN = -4,           /* a Vulkan call failed: vkfGetLastVkResult() says which error */
  VKF_ERROR_OUT_OF_MEMORY = -5,    /* host or device allocation failed */
  VKF_ERROR_IO = -6,               /* a file read or write failed (pipeline cache) */
  VKF_ERROR_UNKNOWN = -7,          /* an unexpected internal failure (a bug: please report it) */
  VKF_RESULT_MAX_ENUM = 0x7FFFFFFF
} VkfResult;

/* "ok", "invalid argument", ... (a static string; "unknown error" for other values). */
VKFLASH_API const char* vkfResultName(VkfResult result);

/* The last VkfResult-returning call on this thread: its error as "<kind>: <reason>" (the C++
 * Status::ToString()), or "" if it succeeded. Valid until the next vkflash call on this thread. */
VKFLASH_API const char* vkfGetLastErrorMessage(void);

/* The VkResult of the last call on this thread when it failed with VKF_ERROR_VULKAN (or a Vulkan
 * allocation failure), else VK_SUCCESS. */
VKFLASH_API VkResult vkfGetLastVkResult(void);

/* The library's version (VKFLASH_VERSION_* of the library that is linked, which may differ from
 * the header's). Any pointer may be NULL. */
VKFLASH_API void vkfGetVersion(uint32_t* major, uint32_t* minor, uint32_t* patch);

/* ------------------------------------------------------------------------------------------ */
/* Handles                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* One device, its pipelines and operators (vkflash::Context). */
typedef struct VkfContext_T* VkfContext;
/* A device-local storage buffer made and owned by a context (vkflash::Buffer). */
typedef struct VkfBuffer_T* VkfBuffer;

/* ------------------------------------------------------------------------------------------ */
/* Shapes and parameters (vkflash.hpp: AttentionShape, AttentionParams)                        */
/* ------------------------------------------------------------------------------------------ */

/* Head dims the kernels accept: 1..VKF_MAX_HEAD_DIM. */
#define VKF_MAX_HEAD_DIM 256u

/* Storage type of Q, K, V, O (and dO, dQ, dK, dV); arithmetic is float32 either way. */
typedef enum VkfDataType {
  VKF_DTYPE_FLOAT32 = 0,
  VKF_DTYPE_FLOAT16 = 1, /* IEEE halves, 2 bytes per element */
  VKF_DTYPE_MAX_ENUM = 0x7FFFFFFF
} VkfDataType;

/* Bytes per element: 4, 2, or 0 for an unknown type. */
VKFLASH_API size_t vkfDataTypeSize(VkfDataType type);

/* Q is [batch, q_heads, q_len, head_dim], K and V [batch, kv_heads, kv_len, head_dim];
 * q_heads % kv_heads == 0. */
typedef struct VkfAttentionShape {
  uint32_t batch;
  uint32_t q_heads;
  uint32_t kv_heads;
  uint32_t q_len;
  uint32_t kv_len;
  uint32_t head_dim;
} VkfAttentionShape;

/* Where a tensor's rows are in its buffer (vkflash::TensorStrides): row n of head h in batch
 * entry b starts at element b * batch + h * head + n * row of the view; the head dim is contiguous. */
typedef struct VkfTensorStrides {
  uint64_t batch;
  uint64_t head;
  uint64_t row;
} VkfTensorStrides;

/* Memory order of the tensors without strides of their own (vkflash::TensorLayout). */
typedef enum VkfTensorLayout {
  VKF_LAYOUT_BHSD = 0, /* [B, H, N, D], the default */
  VKF_LAYOUT_BSHD = 1, /* [B, N, H, D], flash-attn's and llama.cpp's */
  VKF_LAYOUT_MAX_ENUM = 0x7FFFFFFF
} VkfTensorLayout;

/* A sliding window around the bottom-right aligned diagonal (vkflash::AttentionWindow): row i sees
 * key j iff i + Nk - Nq - left <= j <= i + Nk - Nq + right; -1 leaves a side unbounded. */
typedef struct VkfAttentionWindow {
  int32_t left;
  int32_t right;
} VkfAttentionWindow;

/* ALiBi slopes' shape (vkflash::AlibiSlopes); the float32 slopes are in the buffers' alibi_slopes.
 * Calls with ALiBi take sequences of at most VKF_MAX_ALIBI_SEQUENCE queries and keys (Nq and Nk;
 * with cu_seqlens, each sequence's). */
#define VKF_MAX_ALIBI_SEQUENCE 4194304u
typedef enum VkfAlibiSlopes {
  VKF_ALIBI_SLOPES_NONE = 0,
  VKF_ALIBI_SLOPES_PER_HEAD = 1,       /* [Hq] */
  VKF_ALIBI_SLOPES_PER_BATCH_HEAD = 2, /* [B, Hq] */
  VKF_ALIBI_SLOPES_MAX_ENUM = 0x7FFFFFFF
} VkfAlibiSlopes;

/* Element type of a mask over the scores (vkflash::MaskType). */
typedef enum VkfMaskType {
  VKF_MASK_TYPE_NONE = 0,
  VKF_MASK_TYPE_FLOAT32 = 1, /* additive bias; -inf blocks the pair */
  VKF_MASK_TYPE_FLOAT16 = 2, /* additive bias, IEEE halves */
  VKF_MASK_TYPE_BOOL = 3,    /* one byte per element: 0 blocks the pair */
  VKF_MASK_TYPE_MAX_ENUM = 0x7FFFFFFF
} VkfMaskType;

/* A mask broadcastable to [B, Hq, Nq, Nk] (vkflash::AttentionMask), C order over the dimensions
 * it has. broadcast_*: VK_TRUE where the mask has size 1 in that dimension (the C++ field is its
 * negation: AttentionMask::batch == !broadcast_batch), so that zero is a full [B, Hq, Nq, Nk] mask. */
typedef struct VkfAttentionMask {
  VkfMaskType type;
  VkBool32 broadcast_batch;
  VkBool32 broadcast_heads;
  VkBool32 broadcast_rows;
  VkBool32 broadcast_keys;
} VkfAttentionMask;

/* What to compute (vkflash::AttentionParams; forward and backward take the same). Zero is the
 * C++ defaults: float32, no causal mask, no window, scale 1/sqrt(head_dim), no softcap, ALiBi,
 * sinks or mask, deterministic, [B, H, N, D] packed, no sequences. */
typedef struct VkfAttentionParams {
  uint32_t struct_size; /* sizeof(VkfAttentionParams) */
  VkfAttentionShape shape;
  VkfDataType dtype;
  VkBool32 causal; /* bottom-right aligned: row i sees key j iff j <= i + Nk - Nq */
  /* The sliding window, where has_window is VK_TRUE (else unbounded: {-1, -1}). With causal its
   * right side must be -1 or 0. */
  VkBool32 has_window;
  VkfAttentionWindow window;
  /* The softmax scale, where has_scale is VK_TRUE (else 1/sqrt(head_dim)). Must be finite. */
  VkBool32 has_scale;
  float scale;
  float softcap; /* logit softcap: 0 none, else a normal number > 0 (Gemma 2: 50) */
  VkfAlibiSlopes alibi;
  VkBool32 sinks; /* attention sinks: float32 [Hq] logits in the buffers' sinks */
  VkfAttentionMask mask;
  /* Backward only. VK_FALSE (the default): bit-identical gradients run after run. VK_TRUE allows
   * dQ to be summed with float atomics, or from dS stored in the workspace (N x N per head), where
   * that is faster (AttentionParams::deterministic = false). */
  VkBool32 nondeterministic;
  VkfTensorLayout layout;
  /* Per-tensor strides instead of the packed layout, or NULL. dQ, dK, dV have Q's, K's, V's.
   * Read during the call only. */
  const VkfTensorStrides* q_strides;
  const VkfTensorStrides* k_strides;
  const VkfTensorStrides* v_strides;
  const VkfTensorStrides* o_strides;
  const VkfTensorStrides* d_o_strides;
  /* Sequences (docs/design.md, "Sequences"): a pointer to `count` int32 values, or NULL with a
   * count of 0. kv_lengths: [batch]; cu_seqlens_q / cu_seqlens_k: [batch + 1] offsets of ragged
   * tensors packed end to end. Read during the call only (a recorded call keeps its own copy in
   * the workspace). */
  const int32_t* kv_lengths;
  uint32_t kv_lengths_count;
  const int32_t* cu_seqlens_q;
  uint32_t cu_seqlens_q_count;
  const int32_t* cu_seqlens_k;
  uint32_t cu_seqlens_k_count;
} VkfAttentionParams;

/* Checks params against the contract without a device: VKF_ERROR_INVALID_ARGUMENT or
 * VKF_ERROR_UNSUPPORTED with the reason (vkflash::ValidateAttentionParams). */
VKFLASH_API VkfResult vkfValidateAttentionParams(const VkfAttentionParams* params);

/* The (query row, key) pairs a call computes over every batch entry and query head (VisiblePairs). */
VKFLASH_API VkfResult vkfVisiblePairs(const VkfAttentionParams* params, uint64_t* pairs);

/* The mask's elements (0 without one), the bytes its buffer must hold (whole 4-byte words), and
 * the [B, Hq, Nq, Nk] it broadcasts to (MaskElements, MaskBytes, MaskBroadcastShape). */
VKFLASH_API VkfResult vkfMaskElements(const VkfAttentionParams* params, uint64_t* elements);
VKFLASH_API VkfResult vkfMaskBytes(const VkfAttentionParams* params, uint64_t* bytes);
VKFLASH_API VkfResult vkfMaskBroadcastShape(const VkfAttentionParams* params, uint32_t shape[4]);

/* The packed strides of `layout` for `heads` x `rows` rows of `head_dim` elements per batch entry. */
VKFLASH_API VkfResult vkfPackedStrides(VkfTensorLayout layout, uint32_t heads, uint32_t rows, uint32_t head_dim,
                           VkfTensorStrides* strides);

/* ------------------------------------------------------------------------------------------ */
/* Devices (device_info.hpp)                                                                   */
/* ------------------------------------------------------------------------------------------ */

#define VKF_DEVICE_NAME_SIZE 256u
#define VKF_DRIVER_NAME_SIZE 512u
#define VKF_NOTE_SIZE 256u

/* The tensor-core extension a kernel is built for (vkflash::CooperativeMatrixApi). */
typedef enum VkfCooperativeMatrixApi {
  VKF_COOPERATIVE_MATRIX_API_NONE = 0,
  VKF_COOPERATIVE_MATRIX_API_NV = 1,  /* VK_NV_cooperative_matrix */
  VKF_COOPERATIVE_MATRIX_API_KHR = 2, /* VK_KHR_cooperative_matrix */
  VKF_COOPERATIVE_MATRIX_API_NV2 = 3, /* VK_NV_cooperative_matrix2 */
  VKF_COOPERATIVE_MATRIX_API_MAX_ENUM = 0x7FFFFFFF
} VkfCooperativeMatrixApi;

/* What the capabilities probe found on a device, and what vkflash uses there
 * (vkflash::DeviceInfo, whose comments say more; the coopmat2 workgroup list is left out). */
typedef struct VkfDeviceInfo {
  uint32_t struct_size; /* sizeof(VkfDeviceInfo), set by the caller */
  uint32_t index;       /* position in vkEnumeratePhysicalDevices */
  char name[VKF_DEVICE_NAME_SIZE];
  char driver[VKF_DRIVER_NAME_SIZE]; /* driver name and info, where the device reports them */
  VkPhysicalDeviceType type;
  uint32_t vendor_id;
  uint32_t device_id;
  uint32_t api_version;
  uint32_t driver_version;
  uint8_t pipeline_cache_uuid[VK_UUID_SIZE];

  /* Limits and features as the device reports them. */
  uint32_t shared_memory_bytes;       /* maxComputeSharedMemorySize */
  uint32_t max_workgroup_invocations; /* maxComputeWorkGroupInvocations */
  uint32_t max_workgroup_count[3];
  uint64_t max_storage_buffer_range;
  uint64_t max_buffer_size; /* 0 where the device reports none */
  uint64_t min_storage_buffer_offset_alignment;
  uint32_t subgroup_size;
  uint32_t min_subgroup_size;
  uint32_t max_subgroup_size;
  VkBool32 subgroup_shuffle_in_compute;
  VkBool32 storage_buffer_16bit; /* float16 tensors possible */
  VkBool32 shader_float16;
  VkBool32 buffer_float32_atomic_add;
  VkBool32 push_descriptor;
  VkBool32 nv_cooperative_matrix;      /* the extension is offered */
  VkBool32 khr_cooperative_matrix;
  VkBool32 nv_cooperative_matrix_f16;  /* ...and can run vkflash's tensor-core kernels */
  VkBool32 khr_cooperative_matrix_f16;
  VkBool32 nv_cooperative_matrix2;
  VkBool32 nv_cooperative_matrix2_f16;
  uint32_t cooperative_matrix2_granularity;
  uint32_t cooperative_matrix2_reserved_shared_memory;
  uint32_t cooperative_matrix2_subgroup_granularity;
  float timestamp_period_ns; /* 0: no compute timestamps */
  uint32_t compute_units;    /* 0: unknown */
  uint32_t shader_loop_budget; /* 0: none (or not measured: vkfEnumerateDevices) */

  /* What vkflash uses, after ContextCreateInfo's and VKFLASH_* limits. */
  uint32_t usable_shared_memory_bytes;
  VkBool32 use_subgroup_ops;
  VkBool32 use_push_descriptors;
  VkBool32 use_float16_arithmetic;
  VkBool32 use_float32_atomic_add;
  VkfCooperativeMatrixApi cooperative_matrix; /* the subgroup-scope tensor-core kernels' extension */
  char cooperative_matrix_note[VKF_NOTE_SIZE];  /* why none, or the accumulator layout found */
  VkBool32 use_cooperative_matrix2;           /* the VK_NV_cooperative_matrix2 kernels run */
  VkBool32 use_decode_kernels;                /* the decode kernels run */

  /* Appended in 0.1 after the first layout (written where struct_size covers them). */
  VkBool32 subgroup_vote_in_compute; /* VOTE ops in compute shaders (the decode kernels need them) */
} VkfDeviceInfo;

/* Lists the Vulkan devices (no device is created). Writes the first min(capacity, devices) into
 * `infos` (which may be NULL when capacity is 0) and sets *count to the number of devices. The
 * array's stride is infos[0].struct_size: set struct_size in every element. */
VKFLASH_API VkfResult vkfEnumerateDevices(VkfDeviceInfo* infos, uint32_t capacity, uint32_t* count);

/* The index (into vkfEnumerateDevices) of the device vkfCreateContext would use for `selector`:
 * an index or a case-insensitive name substring; NULL or "": VKFLASH_DEVICE, else the best. */
VKFLASH_API VkfResult vkfSelectDeviceIndex(const char* selector, uint32_t* index);

/* The values VkfContextCreateInfo::kernels takes ("auto", "coopmat", then each family's names,
 * preferred first), one by index; NULL past the last. Static strings. */
VKFLASH_API const char* vkfGetKernelsOptionValue(uint32_t index);

/* Static names: "discrete GPU", ...; "VK_NV_cooperative_matrix", ... ("none"). */
VKFLASH_API const char* vkfDeviceTypeName(VkPhysicalDeviceType type);
VKFLASH_API const char* vkfCooperativeMatrixApiName(VkfCooperativeMatrixApi api);

/* ------------------------------------------------------------------------------------------ */
/* Contexts                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef enum VkfMessageSeverity {
  VKF_MESSAGE_SEVERITY_INFO = 0,
  VKF_MESSAGE_SEVERITY_WARNING = 1,
  VKF_MESSAGE_SEVERITY_ERROR = 2,
  VKF_MESSAGE_SEVERITY_MAX_ENUM = 0x7FFFFFFF
} VkfMessageSeverity;

/* Receives the validation layer's messages. `message` is valid during the call only. Called on the
 * thread of the Vulkan call that caused it, up to vkfDestroyContext's return. */
typedef void (*VkfMessageCallback)(VkfMessageSeverity severity, const char* message, void* user_data);

/* Tuning: tiles the kernel families try first (vkflash::TileOverrides, which documents each
 * format; the VKFLASH_*_TILE variables). NULL or "": none. */
typedef struct VkfTileOverrides {
  uint32_t struct_size; /* sizeof(VkfTileOverrides) */
  const char* coopmat_forward;
  const char* coopmat2_forward;
  const char* coopmat2_dkdv;
  const char* coopmat2_dq;
  const char* decode_coopmat2;
  const char* scalar_forward;
  const char* scalar_backward;
  uint32_t decode_splits; /* 0: from the device and the shape */
} VkfTileOverrides;

/* vkflash::ContextOptions. Zero is every default (the VKFLASH_* environment variables, else the
 * device's limits). Strings are copied. */
typedef struct VkfContextCreateInfo {
  uint32_t struct_size; /* sizeof(VkfContextCreateInfo) */
  /* An index into vkfEnumerateDevices or a name substring; NULL or "": VKFLASH_DEVICE, else the
   * best device. Ignored by vkfAdoptDevice. */
  const char* device_selector;
  uint32_t max_shared_bytes; /* use at most this much shared memory; 0: the device's */
  VkBool32 disable_subgroup_ops;
  VkBool32 disable_push_descriptors;
  VkBool32 disable_float16_arithmetic;
  uint32_t max_loop_iterations; /* behave as a driver that ends loops after this many; 0: the device's */
  /* Kernel family: "auto", "decode", "scalar", "coopmat", "coopmat_nv", "coopmat_khr",
   * "coopmat2" (vkfGetKernelsOptionValue); NULL or "": VKFLASH_KERNELS, else "auto". */
  const char* kernels;
  /* VK_LAYER_KHRONOS_validation with synchronization validation (vkfCreateContext only; fails with
   * VKF_ERROR_UNSUPPORTED if the layer is missing). Its messages go to message_callback with
   * message_user_data, or to stderr where the callback is NULL. */
  VkBool32 enable_validation;
  VkfMessageCallback message_callback;
  void* message_user_data; /* must stay valid until vkfDestroyContext returns */
  /* Pipeline cache file: loaded at creation if present, saved by vkfDestroyContext. NULL: none. */
  const char* pipeline_cache_path;
  VkBool32 pipeline_statistics; /* print each pipeline's driver statistics to stderr */
  const VkfTileOverrides* tile_overrides; /* NULL: none */
} VkfContextCreateInfo;

/* Makes a context with its own instance and device. `info` may be NULL (all defaults). On failure
 * *context is NULL. */
VKFLASH_API VkfResult vkfCreateContext(const VkfContextCreateInfo* info, VkfContext* context);

/* What an engine enabled on its VkDevice that vkflash may use (vkflash::AdoptedDeviceFeature;
 * vkflash.hpp says what each needs). */
typedef enum VkfAdoptedDeviceFeatureBits {
  VKF_ADOPTED_STORAGE_BUFFER_16BIT_BIT = 1u << 0,       /* storageBuffer16BitAccess: float16 tensors */
  VKF_ADOPTED_PUSH_DESCRIPTOR_BIT = 1u << 1,            /* VK_KHR_push_descriptor */
  VKF_ADOPTED_COOPERATIVE_MATRIX_NV_BIT = 1u << 2,
  VKF_ADOPTED_COOPERATIVE_MATRIX_KHR_BIT = 1u << 3,
  VKF_ADOPTED_COOPERATIVE_MATRIX2_NV_BIT = 1u << 4,
  VKF_ADOPTED_SHADER_FLOAT16_BIT = 1u << 5,
  VKF_ADOPTED_SHADER_ATOMIC_FLOAT32_ADD_BIT = 1u << 6,
  VKF_ADOPTED_DEVICE_FEATURE_MAX_ENUM = 0x7FFFFFFF
} VkfAdoptedDeviceFeatureBits;
typedef uint32_t VkfAdoptedDeviceFeatureFlags;

/* An engine's own Vulkan objects (vkflash::ExternalDevice). vkflash never destroys them; they
 * must outlive the context. The device has a queue of queue_family_index with compute. */
typedef struct VkfExternalDevice {
  uint32_t struct_size; /* sizeof(VkfExternalDevice) */
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  VkQueue queue; /* used by the synchronous calls (vkfForward, vkfUpload, ...) only */
  uint32_t queue_family_index;
  uint32_t api_version; /* the instance's apiVersion (>= 1.1); 0: VK_API_VERSION_1_1 */
  VkfAdoptedDeviceFeatureFlags enabled;
} VkfExternalDevice;

/* Makes a context on an engine's device. `info` may be NULL (its device_selector and
 * enable_validation are ignored here). On failure *context is NULL. */
VKFLASH_API VkfResult vkfAdoptDevice(const VkfExternalDevice* device, const VkfContextCreateInfo* info, VkfContext* context);

/* Destroys a context: the buffers it made that are still alive first (their handles become
 * invalid), then its pipelines, and its device and instance unless adopted; saves the pipeline
 * cache where it has a path. The caller makes sure nothing recorded with it is still pending.
 * NULL is a no-op. */
VKFLASH_API void vkfDestroyContext(VkfContext context);

/* What the context's device offers and what it uses (after the probes that ran at creation). */
VKFLASH_API VkfResult vkfGetDeviceInfo(VkfContext context, VkfDeviceInfo* info);

/* The context's VkDevice (the engine's own for an adopted one): for the caller's own objects
 * (buffers, barriers) on the same device. Owned by the context unless adopted. */
VKFLASH_API VkfResult vkfGetDevice(VkfContext context, VkDevice* device);

/* ------------------------------------------------------------------------------------------ */
/* Buffers                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* A byte range of a VkBuffer (vkflash::BufferView): the context's own or the caller's. vkflash
 * never owns or frees a caller's VkBuffer. It needs VK_BUFFER_USAGE_STORAGE_BUFFER_BIT (and
 * TRANSFER_SRC/DST for vkfUpload/vkfDownload); offset a multiple of
 * minStorageBufferOffsetAlignment (16 bytes for the tensor-core kernels). A zero view
 * (buffer VK_NULL_HANDLE) is "not given". */
typedef struct VkfBufferView {
  VkBuffer buffer;
  VkDeviceSize offset;
  VkDeviceSize size;
} VkfBufferView;

/* A device-local buffer of `bytes` (> 0) bytes with storage and transfer usage, owned by the
 * context: free it with vkfDestroyBuffer (vkfDestroyContext frees those left). */
VKFLASH_API VkfResult vkfCreateBuffer(VkfContext context, VkDeviceSize bytes, VkfBuffer* buffer);

/* Frees a buffer the context made (nothing recorded with it may still be pending). NULL, or a
 * buffer that is not this context's, is left alone. */
VKFLASH_API void vkfDestroyBuffer(VkfContext context, VkfBuffer buffer);

/* The whole buffer as a view ({VK_NULL_HANDLE, 0, 0} for NULL). */
VKFLASH_API VkfBufferView vkfGetBufferView(VkfBuffer buffer);

/* Copies `bytes` from host memory into the view, or from the view into host memory, through a
 * staging buffer on the context's queue, and waits. `bytes` must fit the view. */
VKFLASH_API VkfResult vkfUpload(VkfContext context, VkfBufferView dst, const void* src, size_t bytes);
VKFLASH_API VkfResult vkfDownload(VkfContext context, VkfBufferView src, void* dst, size_t bytes);

/* Without push descriptors vkflash keeps descriptor sets per VkBuffer: call this before destroying
 * a VkBuffer of yours that was passed in (when nothing recorded with it is pending). */
VKFLASH_API VkfResult vkfForgetBuffer(VkfContext context, VkBuffer buffer);

/* ------------------------------------------------------------------------------------------ */
/* Attention                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* The buffers of one forward call (vkflash::ForwardBuffers, whose comment gives each size).
 * lse, workspace, alibi_slopes, sinks and mask may be zero views: lse is then not written; a
 * workspace is needed by vkfRecordForward where vkfForwardWorkspaceBytes is not 0 (vkfForward
 * makes one); alibi_slopes, sinks and mask are read by the calls whose params use them. */
typedef struct VkfForwardBuffers {
  uint32_t struct_size; /* sizeof(VkfForwardBuffers) */
  VkfBufferView q;
  VkfBufferView k;
  VkfBufferView v;
  VkfBufferView o;
  VkfBufferView lse; /* float32 [B, Hq, Nq] */
  VkfBufferView workspace;
  VkfBufferView alibi_slopes;
  VkfBufferView sinks;
  VkfBufferView mask; /* vkfMaskBytes(params) bytes */
} VkfForwardBuffers;

/* The buffers of one backward call (vkflash::BackwardBuffers). o and lse are the forward's for
 * the same params; d_o is like O, dq like Q, dk and dv like K. workspace: vkfBackwardWorkspaceBytes
 * bytes, needed by vkfRecordBackward (vkfBackward makes one). dsinks (float32 [Hq], with sinks)
 * and dbias (float32, vkfMaskElements floats, with an additive mask) are written where given. */
typedef struct VkfBackwardBuffers {
  uint32_t struct_size; /* sizeof(VkfBackwardBuffers) */
  VkfBufferView q;
  VkfBufferView k;
  VkfBufferView v;
  VkfBufferView o;
  VkfBufferView lse;
  VkfBufferView d_o;
  VkfBufferView dq;
  VkfBufferView dk;
  VkfBufferView dv;
  VkfBufferView workspace;
  VkfBufferView alibi_slopes;
  VkfBufferView sinks;
  VkfBufferView dsinks;
  VkfBufferView mask;
  VkfBufferView dbias;
} VkfBackwardBuffers;

#define VKF_KERNEL_NAME_SIZE 64u
#define VKF_KERNEL_FAMILY_SIZE 32u

/* The kernel and tiles a call runs with (vkflash::KernelChoice). */
typedef struct VkfKernelChoice {
  uint32_t struct_size; /* sizeof(VkfKernelChoice), set by the caller */
  char kernel[VKF_KERNEL_NAME_SIZE];  /* e.g. "forward_f16_subgroup" */
  char family[VKF_KERNEL_FAMILY_SIZE]; /* "decode", "coopmat2", "coopmat" or "scalar" */
  uint32_t block_q;         /* query rows per workgroup */
  uint32_t block_kv;        /* key/value rows per tile */
  uint32_t threads_per_row; /* invocations sharing one query row (0 for tensor-core kernels) */
  uint32_t workgroup_size;
  VkBool32 subgroup_reductions; /* VK_FALSE: shared-memory reductions */
  uint32_t shared_memory_bytes;
  VkfCooperativeMatrixApi cooperative_matrix;
  uint32_t subgroup_size;
  uint32_t matrix_granularity;
} VkfKernelChoice;

/* Which kernel a forward call with these params runs with on this context's device. */
VKFLASH_API VkfResult vkfChooseForwardKernel(VkfContext context, const VkfAttentionParams* params, VkfKernelChoice* choice);

/* Which kernels the backward's two gradient kernels run with (dK/dV and dQ), and whether dQ is
 * summed with float atomics (atomic_dq may be NULL). A dq kernel named
 * "backward_dq_from_ds_f16_coopmat2" marks stored dS (BackwardKernelChoice::stored_ds). */
VKFLASH_API VkfResult vkfChooseBackwardKernels(VkfContext context, const VkfAttentionParams* params, VkfKernelChoice* dkdv,
                                   VkfKernelChoice* dq, VkBool32* atomic_dq);

/* Bytes of workspace a forward call (0 where it needs none) or a backward call needs here. */
VKFLASH_API VkfResult vkfForwardWorkspaceBytes(VkfContext context, const VkfAttentionParams* params, uint64_t* bytes);
VKFLASH_API VkfResult vkfBackwardWorkspaceBytes(VkfContext context, const VkfAttentionParams* params, uint64_t* bytes);

/* Records the forward pass into `command_buffer` (recording state, a queue family with compute)
 * (Context::RecordForward). Barriers: before the call make your writes to q, k, v (and
 * alibi_slopes, sinks, mask) visible to COMPUTE_SHADER reads; after it, o, lse and the workspace
 * are COMPUTE_SHADER SHADER_WRITEs for you to barrier on. Binds its own pipeline and descriptors:
 * re-bind yours afterwards. The buffers must stay alive until the command buffer completes. */
VKFLASH_API VkfResult vkfRecordForward(VkfContext context, VkCommandBuffer command_buffer, const VkfAttentionParams* params,
                           const VkfForwardBuffers* buffers);

/* Records on the context's queue, submits and waits (making a workspace where needed and none is given). */
VKFLASH_API VkfResult vkfForward(VkfContext context, const VkfAttentionParams* params, const VkfForwardBuffers* buffers);

/* Records the backward pass (Context::RecordBackward): barriers as for vkfRecordForward, with
 * inputs q, k, v, o, lse, d_o (and alibi_slopes, sinks, mask) and outputs dq, dk, dv, dsinks,
 * dbias and the workspace. Needs a workspace. */
VKFLASH_API VkfResult vkfRecordBackward(VkfContext context, VkCommandBuffer command_buffer, const VkfAttentionParams* params,
                            const VkfBackwardBuffers* buffers);

/* Records on the context's queue, submits and waits (making a workspace where none is given). */
VKFLASH_API VkfResult vkfBackward(VkfContext context, const VkfAttentionParams* params, const VkfBackwardBuffers* buffers);

/* ------------------------------------------------------------------------------------------ */
/* Pipelines and memory                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* vkflash::PipelineCacheState: what became of the pipeline cache file at creation. */
typedef enum VkfPipelineCacheState {
  VKF_PIPELINE_CACHE_STATE_NOT_USED = 0,           /* no pipeline_cache_path */
  VKF_PIPELINE_CACHE_STATE_STARTED_EMPTY = 1,      /* no file there yet */
  VKF_PIPELINE_CACHE_STATE_LOADED = 2,             /* its blob was given to the driver */
  VKF_PIPELINE_CACHE_STATE_IGNORED_FOREIGN = 3,    /* another device, driver or vkflash version */
  VKF_PIPELINE_CACHE_STATE_IGNORED_CORRUPT = 4,    /* truncated, bad checksum, not a vkflash cache */
  VKF_PIPELINE_CACHE_STATE_IGNORED_UNREADABLE = 5, /* could not be opened or read */
  VKF_PIPELINE_CACHE_STATE_MAX_ENUM = 0x7FFFFFFF
} VkfPipelineCacheState;

/* A static name: "not used", "loaded", ... */
VKFLASH_API const char* vkfPipelineCacheStateName(VkfPipelineCacheState state);

/* Saves the pipeline cache to `path` (NULL or "": the create info's pipeline_cache_path). */
VKFLASH_API VkfResult vkfSavePipelineCache(VkfContext context, const char* path);
VKFLASH_API VkfResult vkfGetPipelineCacheState(VkfContext context, VkfPipelineCacheState* state);
/* Pipelines created so far (one per kernel variant). */
VKFLASH_API VkfResult vkfGetPipelineCount(VkfContext context, uint64_t* count);

/* Bytes of device memory vkflash itself holds now (its buffers, workspaces, staging; not the
 * caller's), and the most since creation or the last vkfResetPeakAllocatedBytes. */
VKFLASH_API VkfResult vkfGetAllocatedBytes(VkfContext context, uint64_t* bytes);
VKFLASH_API VkfResult vkfGetPeakAllocatedBytes(VkfContext context, uint64_t* bytes);
VKFLASH_API VkfResult vkfResetPeakAllocatedBytes(VkfContext context);

/* ------------------------------------------------------------------------------------------ */
/* Diagnostics (diagnostics.hpp)                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Records the work to time into `command_buffer`; anything but VKF_SUCCESS stops the measurement
 * and is its result. */
typedef VkfResult (*VkfRecordCallback)(VkCommandBuffer command_buffer, void* user_data);

/* For benchmarks: records `record` `runs` (> 0) times into one submission on the context's queue,
 * each run between timestamp queries and followed by a full barrier, and writes each run's GPU
 * time in milliseconds to milliseconds[0 .. runs - 1]. VKF_ERROR_UNSUPPORTED where the queue has
 * no timestamps (VkfDeviceInfo::timestamp_period_ns is 0). */
VKFLASH_API VkfResult vkfMeasureGpuTime(VkfContext context, VkfRecordCallback record, void* user_data, uint32_t runs,
                            double* milliseconds);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* VKFLASH_VKFLASH_H_ */
