// Loading attention inputs from .npy files and running them on a device: the parts that the
// forward, backward and check commands share.
#pragma once

#include <vkflash/device_info.hpp>

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "npy.h"

namespace vkflash::cli {

struct AttentionInputs {
  tools::NpyArray q, k, v;
  AttentionParams params;
  // The score variants' values, float32: ALiBi slopes ([Hq] or [B, Hq], as params.alibi says)
  // and sinks ([Hq], with params.sinks); empty where unused.
  std::vector<float> alibi_slopes, sinks;
  // The mask's elements as params.mask.type stores them (MaskBytes: whole words), and its shape as
  // given (the bias's gradient has it); empty without a mask.
  std::vector<uint8_t> mask;
  std::vector<uint64_t> mask_shape;
};

// How the .npy tensors hold their sequences (docs/design.md): --layout bhsd|bshd, --seqlens-k
// (int32 [B]), --cu-seqlens-q / --cu-seqlens-k (int32 [B + 1]; Q-like or K-like tensors are then
// 3-D [total, H, D] and the LSE [Hq, total_q]).
struct SequenceOptions {
  std::string layout = "bhsd";
  std::string seqlens_k, cu_seqlens_q, cu_seqlens_k;
};
// Adds the options above to a command.
void AddSequenceOptions(CLI::App* app, SequenceOptions* options);

// The score and mask variants of a call, by docs/design.md's CLI names: --causal, --window L,R,
// --softcap C, --alibi, --sinks, --mask. forward and backward read the slopes, sinks and mask from
// .npy files (VariantValues::kFiles); check and bench, whose shapes are their own, make them
// (VariantValues::kMade: --alibi, --sinks and --mask are flags).
struct VariantOptions {
  bool causal = false;
  std::string window;  // "L,R" as given; empty: none
  float softcap = 0.0f;
  std::string alibi, sinks, mask;  // kFiles: .npy paths; empty: none
  bool made_alibi = false, made_sinks = false, made_mask = false;  // kMade
  float mask_sparsity = 0.0f;  // kMade, with --mask: the fraction of the bias's 128 x 128 blocks closed
  std::string mask_dtype;  // kMade, with --mask: f32 (also when empty), f16, or bool (the bias's -inf as false)
};
enum class VariantValues { kFiles, kMade };
// Adds the options above to a command.
void AddVariantOptions(CLI::App* app, VariantOptions* options, VariantValues values = VariantValues::kFiles);
// Sets the variants of `params` that need no shape (causal, window, softcap); a --window that is
// not two integers or a --softcap that is negative or not finite is kInvalidArgument (the window's
// values are checked by ValidateAttentionParams).
Status ApplyVariantOptions(const VariantOptions& options, AttentionParams* params);
// Reads the --alibi, --sinks and --mask files for a call of `inputs->params.shape` (float32; slopes
// [Hq] or [B, Hq], sinks [Hq]; a float32, float16 or bool mask that broadcasts to [B, Hq, Nq, Nk]
// as NumPy broadcasts, 1 to 4 dimensions) into `inputs`, and sets params.alibi, sinks and mask.
Status LoadVariantValues(const VariantOptions& options, AttentionInputs* inputs);
// The values check and bench make (--alibi, --sinks as flags): ALiBi's geometric slopes
// 2^(-8 (h + 1) / Hq) per query head, and Normal(0, 1) sinks from `seed`.
std::vector<float> GeometricAlibiSlopes(uint32_t heads);
std::vector<float> RandomSinks(uint32_t heads, uint32_t seed);
// A float32 bias [1, 1, Nq, Nk] for --mask in check and bench: Normal(0, 1) from `seed`, about one
// pair in ten blocked (-inf).
std::vector<float> RandomBias(uint32_t q_len, uint32_t kv_len, uint32_t seed);
// The 128 x 128 blocks of a [Nq, Nk] bias that --mask-sparsity closes: round(fraction * blocks)
// of them, chosen at random from `seed`. A block-sparse mask: vkflash's kernels skip the tiles it
// closes (128 is a multiple of every kernel's tile).
struct ClosedBiasBlocks {
  static constexpr uint32_t kSize = 128;
  uint32_t q_len = 0, kv_len = 0, key_blocks = 0;
  std::vector<bool> closed;  // [row block * key_blocks + key block]
  bool Closes(uint32_t row, uint32_t key) const;
};
ClosedBiasBlocks ChooseClosedBiasBlocks(uint32_t q_len, uint32_t kv_len, float fraction, uint32_t seed);
// Sets every element of the closed blocks of a float32 bias [Nq, Nk] (row-major at `bias`) to -inf.
void CloseBiasBlocks(const ClosedBiasBlocks& blocks, float* bias);
// The name --mask-dtype gives a mask type: "f32", "f16", "bool" ("" for none), and the type
// options.mask_dtype names (float32 where it is empty).
const char* MaskDtypeName(MaskType type);
MaskType MadeMaskType(const VariantOptions& options);
// A bias's values stored as a mask of `type` (MaskBytes: whole 4-byte words): float32, float16, or
// bool (false where the bias is -inf).
std::vector<uint8_t> MaskStorage(const std::vector<float>& bias, MaskType type);
// Those values for the flags given, for `inputs->params.shape`; sets params.alibi, sinks and mask.
void MakeVariantValues(const VariantOptions& options, uint32_t seed, AttentionInputs* inputs);
// A float as the CLI prints it (%g).
std::string FloatText(float value);
// The score variants a call has, e.g. "softcap=50 alibi sinks mask" ("alibi[B,Hq]" for per-batch
// slopes, "mask=bool" for a boolean mask), `separator` between them; "" for none.
std::string ScoreVariantsText(const AttentionParams& params, char separator = ' ');

// Reads Q, K, V (and the sequence and variant files), applies the variants and checks them against the contract: 4-D [B, H, N, D]
// or [B, N, H, D] (3-D [total, H, D] where ragged), one dtype, equal batch counts and D, K and V
// of one shape, Hq % Hkv == 0, a supported head dim, lengths and offsets that fit. Errors name the
// file and problem.
Result<AttentionInputs> LoadAttentionInputs(const std::string& q_path, const std::string& k_path,
                                            const std::string& v_path, const VariantOptions& variants,
                                            std::optional<float> scale,
                                            const SequenceOptions& sequences = {});

struct ForwardOutputs {
  tools::NpyArray o;    // dtype and shape of Q
  tools::NpyArray lse;  // float32 [B, Hq, Nq] ([Hq, total_q] for ragged queries)
};

// Uploads the inputs, runs the forward pass and downloads O and LSE.
Result<ForwardOutputs> RunForward(Context& context, const AttentionInputs& inputs);

struct BackwardOutputs {
  tools::NpyArray dq, dk, dv;  // dtype of the inputs; shapes of Q, K, V
  tools::NpyArray dsinks;      // float32 [Hq], where asked for
  tools::NpyArray dbias;       // float32, the mask's shape, where asked for
};

// Runs the forward (for O and LSE) and the backward with `d_o` (shape and dtype of Q); with
// `dsinks` (and params.sinks) also the sinks' gradient, with `dbias` (and an additive mask) the
// bias's.
Result<BackwardOutputs> RunBackward(Context& context, const AttentionInputs& inputs, const tools::NpyArray& d_o,
                                    bool dsinks = false, bool dbias = false);

// The context for a command: `device` ("" = VKFLASH_DEVICE or the best device).
// kernels: ContextOptions::kernels (empty: VKFLASH_KERNELS, else auto).
Result<std::unique_ptr<Context>> OpenContext(const std::string& device, const std::string& kernels = "");

// A device buffer of `bytes` (at least 4: Vulkan has no empty buffers), holding `data` if any.
Result<Buffer> UploadBuffer(Context& context, const std::vector<uint8_t>& data, uint64_t bytes);
// A device buffer holding `values` (float32), appended to `held`, which keeps it alive; its view.
Result<BufferView> UploadFloats(Context& context, const std::vector<float>& values, std::vector<Buffer>* held);

// Element values of an array as floats (float16 widened).
std::vector<float> ToFloats(const tools::NpyArray& array);
// The mask's elements as floats (a boolean mask's as 0 and 1), as the reference takes them.
std::vector<float> MaskFloats(const AttentionInputs& inputs);

}  // namespace vkflash::cli
