#include "attention_case.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "attention/backends/coopmat2_backend.h"
#include "half.h"
#include "reference_attention.h"
#include "storage_bytes.h"
#include "support/validated_context.h"

namespace vkflash::testing {

std::string Describe(const AttentionParams& p) {
  const auto& s = p.shape;
  return "B=" + std::to_string(s.batch) + " Hq=" + std::to_string(s.q_heads) + " Hkv=" + std::to_string(s.kv_heads) +
         " Nq=" + std::to_string(s.q_len) + " Nk=" + std::to_string(s.kv_len) + " D=" + std::to_string(s.head_dim) +
         " " + DataTypeName(p.dtype) + (p.causal ? " causal" : "") +
         (p.window.left != -1 || p.window.right != -1
              ? " window=" + std::to_string(p.window.left) + "," + std::to_string(p.window.right)
              : "") +
         (p.scale ? " scale=" + std::to_string(*p.scale) : "") +
         (p.softcap != 0.0f ? " softcap=" + std::to_string(p.softcap) : "") +
         (p.alibi == AlibiSlopes::kPerHead ? " alibi[Hq]" : p.alibi == AlibiSlopes::kPerBatchHead ? " alibi[B,Hq]" : "") +
         (p.sinks ? " sinks" : "") + MaskName(p.mask);
}

std::string MaskName(const AttentionMask& m) {
  if (m.type == MaskType::kNone) return "";
  const char* type = m.type == MaskType::kBool ? "bool" : m.type == MaskType::kFloat16 ? "float16" : "float32";
  return std::string(" mask=") + type + "[" + (m.batch ? "B," : "1,") + (m.heads ? "Hq," : "1,") +
         (m.rows ? "Nq," : "1,") + (m.keys ? "Nk]" : "1]");
}

Buffer UploadedMask(Context& context, const AttentionParams& params, const std::vector<float>& values) {
  std::vector<uint8_t> bytes = tools::PackMask(values, params.mask.type);
  bytes.resize(std::max<uint64_t>(MaskBytes(params), 4), 0);  // 4 bytes without a mask
  return UploadedBuffer(context, bytes);
}

AttentionParams MakeParams(const AttentionShape& shape, DataType dtype, bool causal) {
  AttentionParams params;
  params.shape = shape;
  params.dtype = dtype;
  params.causal = causal;
  return params;
}

std::vector<AttentionParams> FullSweep(const std::vector<AttentionShape>& shapes) {
  std::vector<AttentionParams> sweep;
  for (const AttentionShape& shape : shapes) {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
      for (bool causal : {false, true}) sweep.push_back(MakeParams(shape, dtype, causal));
    }
  }
  return sweep;
}

std::vector<float> RandomValues(uint64_t count, DataType dtype, uint32_t seed, float amplitude) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, amplitude);
  std::vector<float> values(count);
  for (float& x : values) x = dtype == DataType::kFloat16 ? tools::RoundToHalf(normal(rng)) : normal(rng);
  return values;
}

void RequireDecodeWhereUsed(Context& context, const AttentionParams& params) {
  const DeviceInfo& info = context.device_info();
  const AttentionShape& s = params.shape;
  const uint64_t rows = uint64_t(s.q_heads / s.kv_heads) * s.q_len;
  const uint32_t granularity = info.cooperative_matrix2_granularity;
  const bool tensor_core_tile = info.use_cooperative_matrix2 && granularity > 0 && s.head_dim % granularity == 0 &&
                                (rows <= 32 || s.head_dim <= 128);
  if (!info.use_decode_kernels || (rows > 8 && !tensor_core_tile) || rows > 64) return;
  auto choice = context.ChooseForwardKernel(params);
  REQUIRE(choice.ok());
  INFO(Describe(params));
  INFO("loop budget " << info.shader_loop_budget);
  REQUIRE(choice->family == "decode");
  REQUIRE(choice->kernel == (rows <= 8 ? "forward_f16_decode" : "forward_f16_decode_coopmat2"));
}

std::vector<Sequence> SequencesOf(const AttentionParams& p) {
  std::vector<Sequence> seqs;
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    Sequence s{0, p.shape.q_len, 0, p.shape.kv_len, p.shape.kv_len};
    if (!p.cu_seqlens_q.empty()) {
      s.q_row0 = p.cu_seqlens_q[b];
      s.q_len = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
    }
    if (!p.cu_seqlens_k.empty()) {
      s.kv_row0 = p.cu_seqlens_k[b];
      s.kv_rows = s.kv_len = p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];
    }
    if (!p.kv_lengths.empty()) s.kv_len = p.kv_lengths[b];
    seqs.push_back(s);
  }
  return seqs;
}

Buffer UploadedBuffer(Context& context, const std::vector<uint8_t>& bytes) {
  auto buffer = context.CreateBuffer(bytes.empty() ? 4 : bytes.size());
  REQUIRE(buffer.ok());
  if (!bytes.empty()) REQUIRE(context.Upload(buffer->view(), bytes.data(), bytes.size()).ok());
  return std::move(buffer).value();
}

Buffer UploadedFloats(Context& context, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return UploadedBuffer(context, bytes);
}

ForwardRun RunForwardCase(Context& context, const AttentionParams& params, uint32_t seed, const ScoreValues& values) {
  const AttentionShape& s = params.shape;
  return RunForwardWith(context, params, RandomValues(s.q_elements(), params.dtype, seed),
                        RandomValues(s.kv_elements(), params.dtype, seed + 1000),
                        RandomValues(s.kv_elements(), params.dtype, seed + 2000), values);
}

bool IsSinkLse(float lse, float sink) {
  return lse == sink || std::fabs(lse - sink) <= 4 * std::numeric_limits<float>::epsilon() * std::max(1.0f, std::fabs(sink));
}

bool RowSeesNoKey(const AttentionParams& params, uint32_t row) {
  for (uint32_t key = 0; key < params.shape.kv_len; ++key)
    if (tools::KeyVisible(params, row, key)) return false;
  return true;
}

void CheckForwardAgainstReference(Context& context, const AttentionParams& params, uint32_t seed,
                                  const ScoreValues& values) {
  INFO(Describe(params));
  const ForwardRun run = RunForwardCase(context, params, seed, values);
  CHECK(run.o_error <= ForwardTolerance(params.dtype));
  CHECK(run.lse_error <= ForwardTolerance(params.dtype));
  // Rows that see no key: exactly zero output, LSE = -inf (with sinks: the sink), never NaN.
  const AttentionShape& s = params.shape;
  std::vector<char> no_key(s.q_len);
  for (uint32_t i = 0; i < s.q_len; ++i) no_key[i] = RowSeesNoKey(params, i);
  for (size_t row = 0; row < run.ref_lse.size(); ++row) {
    if (!no_key[row % s.q_len]) continue;
    INFO("row " << row % s.q_len << " of head " << row / s.q_len % s.q_heads);
    if (params.sinks) {
      REQUIRE(IsSinkLse(run.lse[row], values.sinks[row / s.q_len % s.q_heads]));
    } else {
      REQUIRE(std::isinf(run.lse[row]));
      REQUIRE(run.lse[row] < 0);
    }
    for (uint32_t d = 0; d < s.head_dim; ++d) REQUIRE(run.o[row * s.head_dim + d] == 0.0f);
  }
  RequireNoValidationMessages();
}

ForwardRun RunForwardWith(Context& context, const AttentionParams& params, std::vector<float> q_values,
                          std::vector<float> k_values, std::vector<float> v_values, const ScoreValues& values) {
  const AttentionShape& s = params.shape;
  ForwardRun run;
  run.q = std::move(q_values);
  run.k = std::move(k_values);
  run.v = std::move(v_values);

  const size_t o_bytes = s.q_elements() * DataTypeSize(params.dtype), lse_bytes = s.lse_elements() * 4;
  Buffer q = UploadedBuffer(context, tools::PackTensor(run.q, params.dtype));
  Buffer k = UploadedBuffer(context, tools::PackTensor(run.k, params.dtype));
  Buffer v = UploadedBuffer(context, tools::PackTensor(run.v, params.dtype));
  Buffer o = UploadedBuffer(context, std::vector<uint8_t>(o_bytes, 0xff));      // NaN in both dtypes
  Buffer lse = UploadedBuffer(context, std::vector<uint8_t>(lse_bytes, 0xff));  // NaN
  Buffer slopes = UploadedFloats(context, values.alibi_slopes), sinks = UploadedFloats(context, values.sinks);

  Buffer mask = UploadedMask(context, params, values.mask);
  ForwardBuffers buffers{q.view(), k.view(), v.view(), o.view(), lse.view()};
  if (params.alibi != AlibiSlopes::kNone) buffers.alibi_slopes = slopes.view();
  if (params.sinks) buffers.sinks = sinks.view();
  if (params.mask.type != MaskType::kNone) buffers.mask = mask.view();
  const Status status = context.Forward(params, buffers);
  INFO(status.ToString());
  REQUIRE(status.ok());
  std::vector<uint8_t> o_out(o_bytes);
  run.lse.resize(s.lse_elements());
  REQUIRE(context.Download(o.view(), o_out.data(), o_bytes).ok());
  REQUIRE(context.Download(lse.view(), run.lse.data(), lse_bytes).ok());
  run.o = tools::UnpackTensor(o_out, params.dtype);

  const auto reference = tools::ReferenceAttentionForward(params, run.q, run.k, run.v, values);
  run.ref_o = reference.o;
  run.ref_lse = reference.lse;
  run.o_error = tools::StoredRelativeError(run.o, run.ref_o, params.dtype);
  run.lse_error = tools::RelativeError(run.lse, run.ref_lse);
  return run;
}

}  // namespace vkflash::testing

namespace vkflash::testing {

BackwardRun RunBackwardCase(Context& context, const AttentionParams& params, uint32_t seed, const ScoreValues& values,
                            bool nan_workspace) {
  const AttentionShape& s = params.shape;
  return RunBackwardWith(context, params, RandomValues(s.q_elements(), params.dtype, seed),
                         RandomValues(s.kv_elements(), params.dtype, seed + 1000),
                         RandomValues(s.kv_elements(), params.dtype, seed + 2000),
                         RandomValues(s.q_elements(), params.dtype, seed + 3000), values, nan_workspace);
}

BackwardRun RunBackwardWith(Context& context, const AttentionParams& params, std::vector<float> q_values,
                            std::vector<float> k_values, std::vector<float> v_values, std::vector<float> do_values,
                            const ScoreValues& values, bool nan_workspace) {
  const AttentionShape& s = params.shape;
  const DataType dtype = params.dtype;
  BackwardRun run;
  run.q = std::move(q_values);
  run.k = std::move(k_values);
  run.v = std::move(v_values);
  run.d_o = std::move(do_values);

  const size_t q_bytes = s.q_elements() * DataTypeSize(dtype), kv_bytes = s.kv_elements() * DataTypeSize(dtype);
  Buffer q = UploadedBuffer(context, tools::PackTensor(run.q, dtype));
  Buffer k = UploadedBuffer(context, tools::PackTensor(run.k, dtype));
  Buffer v = UploadedBuffer(context, tools::PackTensor(run.v, dtype));
  Buffer d_o = UploadedBuffer(context, tools::PackTensor(run.d_o, dtype));
  Buffer o = UploadedBuffer(context, std::vector<uint8_t>(q_bytes, 0xff));
  Buffer lse = UploadedBuffer(context, std::vector<uint8_t>(s.lse_elements() * 4, 0xff));
  Buffer dq = UploadedBuffer(context, std::vector<uint8_t>(q_bytes, 0xff));
  Buffer dk = UploadedBuffer(context, std::vector<uint8_t>(kv_bytes, 0xff));
  Buffer dv = UploadedBuffer(context, std::vector<uint8_t>(kv_bytes, 0xff));
  Buffer slopes = UploadedFloats(context, values.alibi_slopes), sinks = UploadedFloats(context, values.sinks);
  Buffer dsinks = UploadedBuffer(context, std::vector<uint8_t>(s.q_heads * sizeof(float), 0xff));
  const BufferView slopes_view = params.alibi != AlibiSlopes::kNone ? slopes.view() : BufferView{};
  const BufferView sinks_view = params.sinks ? sinks.view() : BufferView{};
  Buffer mask = UploadedMask(context, params, values.mask);
  const BufferView mask_view = params.mask.type != MaskType::kNone ? mask.view() : BufferView{};
  const bool additive_mask = params.mask.additive();
  const uint64_t dbias_bytes = MaskElements(params) * sizeof(float);
  Buffer dbias = UploadedBuffer(context, std::vector<uint8_t>(std::max<uint64_t>(dbias_bytes, 4), 0xff));

  Status status = context.Forward(
      params, {q.view(), k.view(), v.view(), o.view(), lse.view(), {}, slopes_view, sinks_view, mask_view});
  INFO(status.ToString());
  REQUIRE(status.ok());
  BackwardBuffers buffers;
  buffers.alibi_slopes = slopes_view;
  buffers.sinks = sinks_view;
  if (params.sinks) buffers.dsinks = dsinks.view();
  buffers.mask = mask_view;
  if (additive_mask) buffers.dbias = dbias.view();
  buffers.q = q.view();
  buffers.k = k.view();
  buffers.v = v.view();
  buffers.o = o.view();
  buffers.lse = lse.view();
  buffers.d_o = d_o.view();
  buffers.dq = dq.view();
  buffers.dk = dk.view();
  buffers.dv = dv.view();  // workspace left empty: Backward() allocates it, unless NaN is asked for
  auto workspace_bytes = context.BackwardWorkspaceBytes(params);
  REQUIRE(workspace_bytes.ok());
  Buffer nan_filled = UploadedBuffer(context, std::vector<uint8_t>(nan_workspace ? *workspace_bytes : 0, 0xff));
  if (nan_workspace && *workspace_bytes > 0) buffers.workspace = nan_filled.view();
  const uint64_t before = context.allocated_bytes();
  context.ResetPeakAllocatedBytes();
  status = context.Backward(params, buffers);
  INFO(status.ToString());
  REQUIRE(status.ok());
  run.peak_extra_bytes = context.peak_allocated_bytes() - before;

  std::vector<uint8_t> bytes(q_bytes);
  REQUIRE(context.Download(dq.view(), bytes.data(), q_bytes).ok());
  run.dq = tools::UnpackTensor(bytes, dtype);
  bytes.resize(kv_bytes);
  REQUIRE(context.Download(dk.view(), bytes.data(), kv_bytes).ok());
  run.dk = tools::UnpackTensor(bytes, dtype);
  REQUIRE(context.Download(dv.view(), bytes.data(), kv_bytes).ok());
  run.dv = tools::UnpackTensor(bytes, dtype);
  if (params.sinks) {
    run.dsinks.resize(s.q_heads);
    REQUIRE(context.Download(dsinks.view(), run.dsinks.data(), s.q_heads * sizeof(float)).ok());
  }
  if (additive_mask) {
    run.dbias.resize(MaskElements(params));
    REQUIRE(context.Download(dbias.view(), run.dbias.data(), dbias_bytes).ok());
  }

  const auto reference = tools::ReferenceAttentionBackward(params, run.q, run.k, run.v, run.d_o, values);
  run.ref_dq = reference.dq;
  run.ref_dk = reference.dk;
  run.ref_dv = reference.dv;
  run.ref_dsinks = reference.dsinks;
  run.dq_error = tools::StoredRelativeError(run.dq, run.ref_dq, dtype);
  run.dk_error = tools::StoredRelativeError(run.dk, run.ref_dk, dtype);
  run.dv_error = tools::StoredRelativeError(run.dv, run.ref_dv, dtype);
  run.dsinks_error = DsinksError(dtype, run.dsinks, reference);
  run.ref_dbias = reference.dbias;
  run.dbias_error = DbiasError(params, run.dbias, reference);
  return run;
}

namespace {

double Norm(const std::vector<double>& x) {
  double sum = 0.0;
  for (const double e : x) sum += e * e;
  return std::sqrt(sum);
}

// (||got - ref|| - ||allowance||) / ||norm_of|| (0 if negative; the difference itself where
// ||norm_of|| is 0), for float16 storage's allowance (ReferenceBackward); NaN, inf or a wrong size
// give inf.
double ErrorBeyondAllowance(const std::vector<float>& got, const std::vector<double>& ref,
                            const std::vector<double>& allowance, const std::vector<double>& norm_of) {
  if (!std::isfinite(tools::RelativeError(got, ref))) return std::numeric_limits<double>::infinity();
  double diff = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) diff += (got[i] - ref[i]) * (got[i] - ref[i]);
  const double beyond = std::max(0.0, std::sqrt(diff) - Norm(allowance)), norm = Norm(norm_of);
  return norm > 0.0 ? beyond / norm : beyond;
}

}  // namespace

double DsinksError(DataType dtype, const std::vector<float>& got, const tools::ReferenceBackward& ref) {
  if (dtype == DataType::kFloat32) return tools::RelativeError(got, ref.dsinks);
  return ErrorBeyondAllowance(got, ref.dsinks, ref.dsinks_storage_allowance, ref.dsinks_terms);
}

double DbiasError(const AttentionParams& params, const std::vector<float>& got, const tools::ReferenceBackward& ref) {
  return ErrorBeyondAllowance(got, ref.dbias, ref.dbias_storage_allowance,
                              params.mask.keys ? ref.dbias : ref.dbias_terms);
}

void CheckGradientErrors(const BackwardRun& run, const AttentionParams& params) {
  CHECK(run.dq_error <= BackwardTolerance(params.dtype));
  CHECK(run.dk_error <= BackwardTolerance(params.dtype));
  CHECK(run.dv_error <= BackwardTolerance(params.dtype));
  if (params.sinks) CHECK(run.dsinks_error <= BackwardTolerance(params.dtype));
  if (params.mask.additive()) {
    REQUIRE(run.dbias.size() == MaskElements(params));
    CHECK(run.dbias_error <= BackwardTolerance(params.dtype));
  }
}

bool ExpectAtomicDq(const Context& context, AttentionParams params) {
  params.deterministic = true;
  auto deterministic = context.ChooseBackwardKernels(params);
  REQUIRE(deterministic.ok());
  const DeviceInfo& info = context.device_info();
  return deterministic->dkdv.family == "coopmat2" && info.use_float32_atomic_add &&
         attention::AtomicDqPays(info, params, deterministic->dq);
}

}  // namespace vkflash::testing
