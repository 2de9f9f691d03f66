// One attention call end to end on a test context: random inputs, poisoned outputs, the GPU
// forward, and the float64 reference to compare with.
#pragma once

#include <vkflash/device_info.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "reference_attention.h"

namespace vkflash::testing {

// "B=.. Hq=.. Hkv=.. Nq=.. Nk=.. D=.. dtype [causal] [window=L,R] [scale=..] [softcap=..] [alibi..]
// [sinks]", for test messages.
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
  std::vector<float> dsinks;         // with params.sinks
  std::vector<float> dbias;          // with an additive params.mask
  std::vector<double> ref_dq, ref_dk, ref_dv, ref_dsinks, ref_dbias;
  double dq_error = 0, dk_error = 0, dv_error = 0;
  // ||dsinks - ref|| over ||ref|| (float32), over the norm of its terms' magnitudes (float16:
  // DsinksError).
  double dsinks_error = 0;
  double dbias_error = 0;  // DbiasError
  uint64_t peak_extra_bytes = 0;     // most device memory vkflash allocated during Backward()
};

// dsinks' error: float32 ||got - ref|| / ||ref||; float16 ||got - ref|| less the storage's allowance
// (ReferenceBackward::dsinks_storage_allowance) over ||ref.dsinks_terms||.
// dsinks sums P_sink * rowsum(dO * O) over rows whose signs differ, so a small dsinks is the
// difference of large terms; O rounded to float16 (2^-11 of each element) moves each term by about
// that much of its size, which can be more than 1e-2 of the sum. float32's rounding cannot.
double DsinksError(DataType dtype, const std::vector<float>& got, const tools::ReferenceBackward& ref);

// dbias' error: ||got - ref|| / ||ref||; for a mask without the keys dimension over the norm of its
// terms' magnitudes (ReferenceBackward::dbias_terms) instead. Such an element sums the dS of a
// row's keys, which cancel: to exactly 0 without sinks (a bias the same for every key of a row does
// not change its softmax), where the kernels return their rounding of the terms; to P_sink *
// rowsum(dO * O) with sinks, which this measure sees only where it is not small beside the terms
// (tests/test_masks.cc checks that share against its own norm). Float16 storage's allowance
// (ReferenceBackward::dbias_storage_allowance) comes off ||got - ref|| first. docs/design.md,
// "Accuracy".
double DbiasError(const AttentionParams& params, const std::vector<float>& got, const tools::ReferenceBackward& ref);

// dQ, dK, dV, and dSinks and dBias where the call has them, within BackwardTolerance of the reference.
void CheckGradientErrors(const BackwardRun& run, const AttentionParams& params);

// The score variants' values (ALiBi slopes, sinks) go to the device and to the reference alike;
// they must match params.alibi and params.sinks.
using ScoreValues = tools::ReferenceVariants;

// Forward (for O and LSE) then backward with random inputs and dO from `seed`; gradient
// buffers (and dsinks, with params.sinks) are filled with NaN first. The workspace is Backward()'s
// own, or with `nan_workspace` one of BackwardWorkspaceBytes filled with NaN (0xff bytes: what a
// kernel reads from it without writing it first shows). REQUIREs success.
BackwardRun RunBackwardCase(Context& context, const AttentionParams& params, uint32_t seed,
                            const ScoreValues& values = {}, bool nan_workspace = false);
// ...with these inputs (values the storage dtype holds exactly).
BackwardRun RunBackwardWith(Context& context, const AttentionParams& params, std::vector<float> q, std::vector<float> k,
                            std::vector<float> v, std::vector<float> d_o, const ScoreValues& values = {},
                            bool nan_workspace = false);

// Whether a row's LSE is `sink`, as the contract gives a row that sees no key with sinks: within
// a few float32 roundings (kernels that work in base 2 go through sink * log2(e) and back).
bool IsSinkLse(float lse, float sink);

// Whether query row `row` (of Nq) sees no key (docs/design.md: causal and the window).
bool RowSeesNoKey(const AttentionParams& params, uint32_t row);

// RunForwardCase, then O and LSE within ForwardTolerance of the reference; rows that see no key
// exactly O = 0 and LSE = -inf (with sinks: their head's sink); no validation message.
void CheckForwardAgainstReference(Context& context, const AttentionParams& params, uint32_t seed,
                                  const ScoreValues& values = {});

// Where `context` has the decode kernels and they take this call, it runs them: the register
// kernel up to 8 packed rows (query heads per KV head x query rows); the tensor-core one up to 64
// where the context uses VK_NV_cooperative_matrix2 and one of its tiles fits (a head dim that is a
// multiple of the granularity; 33-64 rows only up to D = 128). REQUIREs it. Under a loop budget
// the register kernel declines a call whose step and merge do not fit half of it (many packed rows
// at a large odd D / 8): a case that needs the decode kernel there takes other shapes.
void RequireDecodeWhereUsed(Context& context, const AttentionParams& params);

// Whether a backward call with deterministic = false sums dQ with atomics in `context`: where the
// VK_NV_cooperative_matrix2 family runs the deterministic call (its smallest atomic tile fits there
// too) and the device has float atomics, if the dQ kernel would leave the device idle
// (AtomicDqPays).
bool ExpectAtomicDq(const Context& context, AttentionParams params);

// One batch entry's rows, as docs/design.md's "Sequences" defines them: its query rows
// [q_row0, q_row0 + q_len) of Q, its key rows [kv_row0, kv_row0 + kv_rows) of K and V, of which it
// attends to the first kv_len.
struct Sequence {
  uint32_t q_row0, q_len, kv_row0, kv_len, kv_rows;
};
std::vector<Sequence> SequencesOf(const AttentionParams& params);

// A device buffer holding `bytes` (4 bytes when empty). REQUIREs success.
Buffer UploadedBuffer(Context& context, const std::vector<uint8_t>& bytes);

// A device buffer holding float32 `values` (4 bytes when empty).
Buffer UploadedFloats(Context& context, const std::vector<float>& values);
// params.mask's elements (ScoreValues::mask) in its type (bool: 0 or 1 bytes), whole words.
Buffer UploadedMask(Context& context, const AttentionParams& params, const std::vector<float>& values);
// " mask=type[B,Hq,1,Nk]" (the dimensions it has), or "" without a mask.
std::string MaskName(const AttentionMask& mask);

// Runs a forward on `context` with random inputs from `seed`; O and LSE buffers are filled with
// NaN before the run, so anything the kernel fails to write shows up. REQUIREs success.
ForwardRun RunForwardCase(Context& context, const AttentionParams& params, uint32_t seed,
                          const ScoreValues& values = {});
// ...with these inputs (values the storage dtype holds exactly).
ForwardRun RunForwardWith(Context& context, const AttentionParams& params, std::vector<float> q, std::vector<float> k,
                          std::vector<float> v, const ScoreValues& values = {});

}  // namespace vkflash::testing
