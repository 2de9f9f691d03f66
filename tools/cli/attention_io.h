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

// The score and mask variants of a call, by docs/design.md's CLI names: --causal, --window L,R.
struct VariantOptions {
  bool causal = false;
  std::string window;  // "L,R" as given; empty: none
};
// Adds the options above to a command.
void AddVariantOptions(CLI::App* app, VariantOptions* options);
// Sets the variants of `params`; a --window that is not two integers is kInvalidArgument (the
// values themselves are checked by ValidateAttentionParams).
Status ApplyVariantOptions(const VariantOptions& options, AttentionParams* params);

// Reads Q, K, V (and the sequence files), applies the variants and checks them against the contract: 4-D [B, H, N, D]
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
};

// Runs the forward (for O and LSE) and the backward with `d_o` (shape and dtype of Q).
Result<BackwardOutputs> RunBackward(Context& context, const AttentionInputs& inputs, const tools::NpyArray& d_o);

// The context for a command: `device` ("" = VKFLASH_DEVICE or the best device).
// kernels: ContextOptions::kernels (empty: VKFLASH_KERNELS, else auto).
Result<std::unique_ptr<Context>> OpenContext(const std::string& device, const std::string& kernels = "");

// A device buffer of `bytes` (at least 4: Vulkan has no empty buffers), holding `data` if any.
Result<Buffer> UploadBuffer(Context& context, const std::vector<uint8_t>& data, uint64_t bytes);

// Element values of an array as floats (float16 widened).
std::vector<float> ToFloats(const tools::NpyArray& array);

}  // namespace vkflash::cli
