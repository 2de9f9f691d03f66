// One attention call end to end on a test context: random inputs, poisoned outputs, the GPU
// forward, and the float64 reference to compare with.
#pragma once

#include <vkflash/device_info.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace vkflash::testing {

// "B=.. Hq=.. Hkv=.. Nq=.. Nk=.. D=.. dtype [causal] [window=L,R] [scale=..]", for test messages.
std::string Describe(const AttentionParams& params);

// The params of `shape` in `dtype`, default scale.
AttentionParams MakeParams(const AttentionShape& shape, DataType dtype, bool causal);

// Every shape in `shapes` x {float32, float16} x {not causal, causal}, default scale.
std::vector<AttentionParams> FullSweep(const std::vector<AttentionShape>& shapes);

// Contract tolerances (docs/design.md): ||out - ref|| / ||ref||.
inline double ForwardTolerance(DataType dtype) { return dtype == DataType::kFloat16 ? 5e-3 : 2e-4; }

struct ForwardRun {
  std::vector<float> q, k, v;       // inputs as the GPU saw them (float16-rounded for float16)
  std::vector<float> o, lse;        // GPU results (O widened to float)
  std::vector<double> ref_o, ref_lse;
  double o_error = 0, lse_error = 0;
};

// Normal(0, 1) values times `amplitude`, rounded to float16 when dtype is float16.
std::vector<float> RandomValues(uint64_t count, DataType dtype, uint32_t seed, float amplitude = 1.0f);

// Issue tolerances for gradients: ||grad - ref|| / ||ref||.
inline double BackwardTolerance(DataType dtype) { return dtype == DataType::kFloat16 ? 1e-2 : 5e-4; }

struct BackwardRun {
  std::vector<float> q, k, v, d_o;   // inputs as the GPU saw them
  std::vector<float> dq, dk, dv;     // GPU gradients
  std::vector<double> ref_dq, ref_dk, ref_dv;
  double dq_error = 0, dk_error = 0, dv_error = 0;
  uint64_t peak_extra_bytes = 0;     // most device memory vkflash allocated during Backward()
};

// Forward (for O and LSE) then backward with random inputs and dO from `seed`; gradient
// buffers are filled with NaN first. REQUIREs success.
BackwardRun RunBackwardCase(Context& context, const AttentionParams& params, uint32_t seed);
// ...with these inputs (values the storage dtype holds exactly).
BackwardRun RunBackwardWith(Context& context, const AttentionParams& params, std::vector<float> q, std::vector<float> k,
                            std::vector<float> v, std::vector<float> d_o);

// RunForwardCase, then O and LSE within ForwardTolerance of the reference; rows that see no key
// exactly O = 0 and LSE = -inf; no validation message.
void CheckForwardAgainstReference(Context& context, const AttentionParams& params, uint32_t seed);

// Where `context` has the decode kernels and they take this call, it runs them: the register
// kernel up to 8 packed rows (query heads per KV head x query rows); the tensor-core one up to 64
// where the context uses VK_NV_cooperative_matrix2 and one of its tiles fits (a head dim that is a
// multiple of the granularity; 33-64 rows only up to D = 128). REQUIREs it.
void RequireDecodeWhereUsed(Context& context, const AttentionParams& params);

// Whether a backward call with deterministic = false sums dQ with atomics in `context`: where the
// VK_NV_cooperative_matrix2 family runs the deterministic call (its smallest atomic tile fits there
// too) and the device has float atomics, if the dQ kernel would leave the device idle
// (AtomicDqPays).
bool ExpectAtomicDq(const Context& context, AttentionParams params);

// A device buffer holding `bytes` (4 bytes when empty). REQUIREs success.
Buffer UploadedBuffer(Context& context, const std::vector<uint8_t>& bytes);

// Runs a forward on `context` with random inputs from `seed`; O and LSE buffers are filled with
// NaN before the run, so anything the kernel fails to write shows up. REQUIREs success.
ForwardRun RunForwardCase(Context& context, const AttentionParams& params, uint32_t seed);
// ...with these inputs (values the storage dtype holds exactly).
ForwardRun RunForwardWith(Context& context, const AttentionParams& params, std::vector<float> q, std::vector<float> k,
                          std::vector<float> v);

}  // namespace vkflash::testing
