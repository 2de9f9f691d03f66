// Loading attention inputs from .npy files and running them on a device: the parts that the
// forward, backward and check commands share.
#pragma once

#include <vkflash/device_info.hpp>

#include <optional>
#include <string>
#include <vector>

#include "npy.h"

namespace vkflash::cli {

struct AttentionInputs {
  tools::NpyArray q, k, v;
  AttentionParams params;
};

// Reads Q, K, V and checks them against the contract: 4-D [B, H, N, D], one dtype, equal B and
// D, K and V of one shape, Hq % Hkv == 0, a supported head dim. Errors name the file and problem.
Result<AttentionInputs> LoadAttentionInputs(const std::string& q_path, const std::string& k_path,
                                            const std::string& v_path, bool causal, std::optional<float> scale);

struct ForwardOutputs {
  tools::NpyArray o;    // dtype and shape of Q
  tools::NpyArray lse;  // float32 [B, Hq, Nq]
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
