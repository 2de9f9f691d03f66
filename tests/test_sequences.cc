// Tensors as engines hold them: strides ([B, N, H, D], slices of a larger buffer), KV caches
// filled to different lengths per sequence, and ragged (varlen) batches, forward and backward,
// against the float64 reference of each sequence on its own. Buffers are filled with NaN wherever
// no sequence has a row (gaps between strided rows, unused cache rows, past the last offset): a
// kernel that reads there gives NaN, one that writes there changes the poison.
#include <catch2/catch.hpp>
#include <vkflash/device_info.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "reference_attention.h"
#include "storage_bytes.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kPoison = 1000.0f;  // what outputs hold before the call (exact in float16)

// Where one tensor's rows are in its host array (the same rules the API documents).
struct Placement {
  TensorStrides strides;
  bool ragged = false;
  uint64_t offset = 0;  // elements before the tensor (the view's offset)
  uint64_t elements = 0;  // the host array's size

  uint64_t At(uint32_t b, uint32_t h, uint32_t memory_row) const {
    return offset + (ragged ? 0 : b * strides.batch) + h * strides.head + uint64_t(memory_row) * strides.row;
  }
};

Placement Place(const AttentionParams& p, const std::optional<TensorStrides>& given, bool key_tensor, uint64_t offset) {
  const uint32_t heads = key_tensor ? p.shape.kv_heads : p.shape.q_heads;
  const uint32_t rows = key_tensor ? p.shape.kv_len : p.shape.q_len;
  Placement t;
  t.strides = given.value_or(PackedStrides(p.layout, heads, rows, p.shape.head_dim));
  t.ragged = key_tensor ? !p.cu_seqlens_k.empty() : !p.cu_seqlens_q.empty();
  t.offset = offset;
  const uint32_t batches = t.ragged ? 1 : p.shape.batch;
  t.elements = offset + p.shape.head_dim + 64;  // the furthest row, and some slack after it
  if (batches > 0 && heads > 0 && rows > 0) {
    t.elements += (t.ragged ? 0 : (batches - 1) * t.strides.batch) + (heads - 1) * t.strides.head +
                  uint64_t(rows - 1) * t.strides.row;
  }
  return t;
}

// A host tensor filled with `fill`, sequence rows from `values` (per sequence, packed
// [H, len, D]); `rows_of` gives each sequence's first memory row and row count.
template <typename RowsOf>
void Scatter(const AttentionParams& p, const Placement& t, uint32_t heads, const std::vector<std::vector<float>>& values,
             RowsOf rows_of, std::vector<float>* host) {
  const uint32_t d = p.shape.head_dim;
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    const auto [row0, rows] = rows_of(b);
    for (uint32_t h = 0; h < heads; ++h)
      for (uint32_t n = 0; n < rows; ++n)
        for (uint32_t c = 0; c < d; ++c) (*host)[t.At(b, h, row0 + n) + c] = values[b][(uint64_t(h) * rows + n) * d + c];
  }
}

template <typename RowsOf>
std::vector<std::vector<float>> Gather(const AttentionParams& p, const Placement& t, uint32_t heads,
                                       const std::vector<float>& host, RowsOf rows_of) {
  const uint32_t d = p.shape.head_dim;
  std::vector<std::vector<float>> out(p.shape.batch);
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    const auto [row0, rows] = rows_of(b);
    out[b].resize(uint64_t(heads) * rows * d);
    for (uint32_t h = 0; h < heads; ++h)
      for (uint32_t n = 0; n < rows; ++n)
        for (uint32_t c = 0; c < d; ++c) out[b][(uint64_t(h) * rows + n) * d + c] = host[t.At(b, h, row0 + n) + c];
  }
  return out;
}

// Elements of `host` outside every row `rows_of` names must still hold `fill`.
template <typename RowsOf>
void RequireUntouchedOutside(const AttentionParams& p, const Placement& t, uint32_t heads, const std::vector<float>& host,
                             RowsOf rows_of, float fill, const char* name) {
  std::vector<char> inside(host.size(), 0);
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    const auto [row0, rows] = rows_of(b);
    for (uint32_t h = 0; h < heads; ++h)
      for (uint32_t n = 0; n < rows; ++n) std::fill_n(inside.begin() + t.At(b, h, row0 + n), p.shape.head_dim, 1);
  }
  uint64_t changed = 0;
  for (uint64_t i = 0; i < host.size(); ++i)
    if (!inside[i] && !(host[i] == fill || (std::isnan(fill) && std::isnan(host[i])))) ++changed;
  INFO(name << ": elements outside the sequences' rows that changed");
  REQUIRE(changed == 0);
}

uint32_t ViewAlignment(Context& context) {
  return std::max<uint32_t>(16, uint32_t(context.device_info().min_storage_buffer_offset_alignment));
}

// A device buffer holding `host` (packed in the call's dtype), and a view from `offset_elements`.
struct DeviceTensor {
  Buffer buffer;
  BufferView view;
};
DeviceTensor Upload(Context& context, const std::vector<float>& host, DataType dtype, uint64_t offset_elements) {
  DeviceTensor t;
  t.buffer = UploadedBuffer(context, tools::PackTensor(host, dtype));
  const VkDeviceSize offset = offset_elements * DataTypeSize(dtype);
  t.view = {t.buffer.handle(), offset, t.buffer.size() - offset};
  return t;
}
std::vector<float> Download(Context& context, const DeviceTensor& t, DataType dtype) {
  std::vector<uint8_t> bytes(t.buffer.size());
  REQUIRE(context.Download(t.buffer.view(), bytes.data(), bytes.size()).ok());
  return tools::UnpackTensor(bytes, dtype);
}

// The params of sequence b alone, packed [B=1, H, N, D].
AttentionParams SequenceParams(const AttentionParams& p, const Sequence& s) {
  AttentionParams one;
  one.shape = {1, p.shape.q_heads, p.shape.kv_heads, s.q_len, s.kv_len, p.shape.head_dim};
  one.dtype = p.dtype;
  one.causal = p.causal;
  one.window = p.window;
  one.scale = p.scale;
  return one;
}

// The whole case: random sequences, the strided/ragged call forward (and backward), each sequence
// against the float64 reference, every element outside the sequences' rows untouched.
// `view_offset`: elements before every tensor in its buffer (a slice), a multiple of the alignment.
void CheckSequencesCall(Context& context, const AttentionParams& p, uint32_t seed, bool backward) {
  INFO(Describe(p) << (p.layout == TensorLayout::kBshd ? " bshd" : "") << (p.kv_lengths.empty() ? "" : " kv_lengths")
                   << (p.cu_seqlens_q.empty() ? "" : " cu_q") << (p.cu_seqlens_k.empty() ? "" : " cu_k"));
  const uint32_t d = p.shape.head_dim, hq = p.shape.q_heads, hkv = p.shape.kv_heads;
  const std::vector<Sequence> seqs = SequencesOf(p);
  const uint64_t offset = ViewAlignment(context) / DataTypeSize(p.dtype) * 3;  // a slice past the buffer's start
  const Placement q = Place(p, p.q_strides, false, offset), k = Place(p, p.k_strides, true, offset),
                  v = Place(p, p.v_strides, true, offset), o = Place(p, p.o_strides, false, offset),
                  d_o = Place(p, p.d_o_strides, false, offset);
  const auto q_rows = [&](uint32_t b) { return std::pair<uint32_t, uint32_t>{seqs[b].q_row0, seqs[b].q_len}; };
  const auto kv_used = [&](uint32_t b) { return std::pair<uint32_t, uint32_t>{seqs[b].kv_row0, seqs[b].kv_len}; };
  const auto kv_owned = [&](uint32_t b) { return std::pair<uint32_t, uint32_t>{seqs[b].kv_row0, seqs[b].kv_rows}; };

  // Inputs: per sequence, random; everywhere else NaN.
  std::vector<std::vector<float>> q_seq, k_seq, v_seq, do_seq;
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    q_seq.push_back(RandomValues(uint64_t(hq) * seqs[b].q_len * d, p.dtype, seed + 10 * b));
    k_seq.push_back(RandomValues(uint64_t(hkv) * seqs[b].kv_len * d, p.dtype, seed + 10 * b + 1));
    v_seq.push_back(RandomValues(uint64_t(hkv) * seqs[b].kv_len * d, p.dtype, seed + 10 * b + 2));
    do_seq.push_back(RandomValues(uint64_t(hq) * seqs[b].q_len * d, p.dtype, seed + 10 * b + 3));
  }
  std::vector<float> q_host(q.elements, kNaN), k_host(k.elements, kNaN), v_host(v.elements, kNaN),
      do_host(d_o.elements, kNaN);
  Scatter(p, q, hq, q_seq, q_rows, &q_host);
  Scatter(p, k, hkv, k_seq, kv_used, &k_host);
  Scatter(p, v, hkv, v_seq, kv_used, &v_host);
  Scatter(p, d_o, hq, do_seq, q_rows, &do_host);

  DeviceTensor q_dev = Upload(context, q_host, p.dtype, offset), k_dev = Upload(context, k_host, p.dtype, offset),
               v_dev = Upload(context, v_host, p.dtype, offset),
               o_dev = Upload(context, std::vector<float>(o.elements, kPoison), p.dtype, offset);
  const bool ragged_q = !p.cu_seqlens_q.empty();
  const uint64_t lse_elements = uint64_t(ragged_q ? 1 : p.shape.batch) * hq * p.shape.q_len + 64;
  DeviceTensor lse_dev = Upload(context, std::vector<float>(lse_elements, kPoison), DataType::kFloat32, 0);
  ForwardBuffers fwd{q_dev.view, k_dev.view, v_dev.view, o_dev.view, lse_dev.view, {}};
  const Status forward = context.Forward(p, fwd);
  INFO("forward: " << forward.ToString());
  REQUIRE(forward.ok());
  RequireNoValidationMessages();

  const std::vector<float> o_host = Download(context, o_dev, p.dtype);
  const std::vector<float> lse_host = Download(context, lse_dev, DataType::kFloat32);
  const auto o_seq = Gather(p, o, hq, o_host, q_rows);
  RequireUntouchedOutside(p, o, hq, o_host, q_rows, kPoison, "O");
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    INFO("sequence " << b << ": Nq " << seqs[b].q_len << ", keys " << seqs[b].kv_len << " of " << seqs[b].kv_rows);
    const AttentionParams one = SequenceParams(p, seqs[b]);
    const tools::ReferenceForward ref = tools::ReferenceAttentionForward(one, q_seq[b], k_seq[b], v_seq[b]);
    std::vector<float> lse_b;
    for (uint32_t h = 0; h < hq; ++h)
      for (uint32_t n = 0; n < seqs[b].q_len; ++n)
        lse_b.push_back(lse_host[ragged_q ? uint64_t(h) * p.shape.q_len + seqs[b].q_row0 + n
                                          : (uint64_t(b) * hq + h) * p.shape.q_len + n]);
    REQUIRE(tools::RelativeError(o_seq[b], ref.o) <= ForwardTolerance(p.dtype));
    REQUIRE(tools::RelativeError(lse_b, ref.lse) <= ForwardTolerance(p.dtype));
    if (seqs[b].kv_len == 0) {  // no key: zeros and -inf, exactly
      REQUIRE(std::all_of(o_seq[b].begin(), o_seq[b].end(), [](float x) { return x == 0.0f; }));
      REQUIRE(std::all_of(lse_b.begin(), lse_b.end(), [](float x) { return std::isinf(x) && x < 0; }));
    }
  }
  if (!backward) return;

  DeviceTensor do_dev = Upload(context, do_host, p.dtype, offset),
               dq_dev = Upload(context, std::vector<float>(q.elements, kPoison), p.dtype, offset),
               dk_dev = Upload(context, std::vector<float>(k.elements, kPoison), p.dtype, offset),
               dv_dev = Upload(context, std::vector<float>(v.elements, kPoison), p.dtype, offset);
  BackwardBuffers bwd{q_dev.view, k_dev.view, v_dev.view, o_dev.view, lse_dev.view, do_dev.view,
                      dq_dev.view, dk_dev.view, dv_dev.view, {}};
  const Status backward_status = context.Backward(p, bwd);
  INFO("backward: " << backward_status.ToString());
  REQUIRE(backward_status.ok());
  RequireNoValidationMessages();
  const std::vector<float> dq_host = Download(context, dq_dev, p.dtype), dk_host = Download(context, dk_dev, p.dtype),
                           dv_host = Download(context, dv_dev, p.dtype);
  // dQ has Q's strides, dK and dV K's and V's; dK, dV rows a sequence owns but does not attend to are 0.
  RequireUntouchedOutside(p, q, hq, dq_host, q_rows, kPoison, "dQ");
  RequireUntouchedOutside(p, k, hkv, dk_host, kv_owned, kPoison, "dK");
  RequireUntouchedOutside(p, v, hkv, dv_host, kv_owned, kPoison, "dV");
  const auto dq_seq = Gather(p, q, hq, dq_host, q_rows);
  const auto dk_owned = Gather(p, k, hkv, dk_host, kv_owned), dv_owned = Gather(p, v, hkv, dv_host, kv_owned);
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    INFO("sequence " << b << ": Nq " << seqs[b].q_len << ", keys " << seqs[b].kv_len << " of " << seqs[b].kv_rows);
    const AttentionParams one = SequenceParams(p, seqs[b]);
    const tools::ReferenceBackward ref = tools::ReferenceAttentionBackward(one, q_seq[b], k_seq[b], v_seq[b], do_seq[b]);
    std::vector<float> dk_used, dv_used;
    uint64_t unused_nonzero = 0;
    for (uint32_t h = 0; h < hkv; ++h) {
      for (uint32_t n = 0; n < seqs[b].kv_rows; ++n) {
        for (uint32_t c = 0; c < d; ++c) {
          const uint64_t at = (uint64_t(h) * seqs[b].kv_rows + n) * d + c;
          if (n < seqs[b].kv_len) {
            dk_used.push_back(dk_owned[b][at]);
            dv_used.push_back(dv_owned[b][at]);
          } else {
            unused_nonzero += dk_owned[b][at] != 0.0f || dv_owned[b][at] != 0.0f;
          }
        }
      }
    }
    REQUIRE(unused_nonzero == 0);
    REQUIRE(tools::RelativeError(dq_seq[b], ref.dq) <= BackwardTolerance(p.dtype));
    REQUIRE(tools::RelativeError(dk_used, ref.dk) <= BackwardTolerance(p.dtype));
    REQUIRE(tools::RelativeError(dv_used, ref.dv) <= BackwardTolerance(p.dtype));
  }
}

}  // namespace

TEST_CASE("layouts: [B, N, H, D], interleaved QKV, slices of a larger cache, forward and backward",
          "[forward][backward][sequences]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 7000;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (bool causal : {false, true}) {
      // bshd for every tensor.
      AttentionParams p = MakeParams({2, 4, 2, 37, 45, 32}, dtype, causal);
      p.layout = TensorLayout::kBshd;
      CheckSequencesCall(context, p, seed++, true);
      // Q, K, V interleaved per row in one [B, N, 3, H, D]-like run (each its own view here):
      // row stride 3 H D; O packed bhsd; dO bshd.
      p = MakeParams({2, 2, 2, 33, 33, 64}, dtype, causal);
      p.q_strides = p.k_strides = p.v_strides = TensorStrides{33ull * 3 * 2 * 64, 64, 3 * 2 * 64};
      p.d_o_strides = PackedStrides(TensorLayout::kBshd, 2, 33, 64);
      CheckSequencesCall(context, p, seed++, true);
      // K and V: the first 40 rows of a cache of 100 per head (a slice), GQA 4:1.
      p = MakeParams({1, 8, 2, 5, 40, 64}, dtype, causal);
      p.k_strides = p.v_strides = TensorStrides{2ull * 100 * 64, 100ull * 64, 64};
      CheckSequencesCall(context, p, seed++, true);
    }
  }
  // Strides that are not multiples of 8 elements: the scalar kernels take them.
  AttentionParams p = MakeParams({1, 2, 1, 17, 19, 20}, DataType::kFloat16, true);
  p.q_strides = TensorStrides{0, 17ull * 21, 21};
  CheckSequencesCall(context, p, seed++, true);
}

TEST_CASE("KV lengths per sequence: a cache filled to different lengths, decode and prefill, a zero length",
          "[forward][backward][sequences][decode]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 7100;
  for (bool causal : {false, true}) {
    // Decode over a cache of 3000 rows: one query row, GQA groups of 4.
    AttentionParams p = MakeParams({4, 8, 2, 1, 3000, 128}, DataType::kFloat16, causal);
    p.kv_lengths = {3000, 1, 0, 1777};
    CheckSequencesCall(context, p, seed++, false);
    // bshd cache (llama.cpp's), speculative rows.
    p = MakeParams({3, 4, 2, 3, 700, 64}, DataType::kFloat16, causal);
    p.layout = TensorLayout::kBshd;
    p.kv_lengths = {2, 700, 333};
    CheckSequencesCall(context, p, seed++, false);
    // More speculative rows than the decode registers hold (4 heads x 4 rows: tensor cores where
    // they run), and ragged queries (up to 8 rows of 4 heads) over per-sequence lengths.
    p = MakeParams({3, 8, 2, 4, 700, 64}, DataType::kFloat16, causal);
    p.layout = TensorLayout::kBshd;
    p.kv_lengths = {3, 700, 400};
    RequireDecodeWhereUsed(context, p);
    CheckSequencesCall(context, p, seed++, false);
    p = MakeParams({3, 8, 2, 14, 900, 128}, DataType::kFloat16, causal);
    p.cu_seqlens_q = {0, 8, 9, 14};
    p.kv_lengths = {900, 5, 300};
    RequireDecodeWhereUsed(context, p);  // 4 x 14 rows in all, 4 x 8 in the longest: tensor cores either way
    CheckSequencesCall(context, p, seed++, false);
    // Prefill-sized, float32 and float16, forward and backward (dK, dV zero past each length).
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
      p = MakeParams({3, 2, 1, 40, 90, 64}, dtype, causal);
      p.kv_lengths = {90, 0, 41};
      CheckSequencesCall(context, p, seed++, true);
    }
  }
}

TEST_CASE("varlen: ragged batches packed end to end, forward and backward, against the sequences alone",
          "[forward][backward][sequences]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 7200;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (bool causal : {false, true}) {
      // flash-attn's varlen layout [total, H, D]; sequences of 17, 0, 64, 5 queries and 20, 3, 64, 0 keys.
      AttentionParams p = MakeParams({4, 4, 2, 86, 87, 64}, dtype, causal);
      p.layout = TensorLayout::kBshd;
      p.cu_seqlens_q = {0, 17, 17, 81, 86};
      p.cu_seqlens_k = {0, 20, 23, 87, 87};
      CheckSequencesCall(context, p, seed++, true);
      // Ragged queries over a padded KV cache with per-sequence lengths; rows past the last offset.
      p = MakeParams({3, 2, 2, 40, 50, 32}, dtype, causal);
      p.cu_seqlens_q = {0, 1, 9, 30};
      p.kv_lengths = {50, 7, 20};
      CheckSequencesCall(context, p, seed++, true);
      // Ragged keys with used lengths inside each sequence's rows (seqused_k).
      p = MakeParams({2, 2, 1, 30, 60, 64}, dtype, causal);
      p.layout = TensorLayout::kBshd;
      p.cu_seqlens_q = {0, 10, 30};
      p.cu_seqlens_k = {0, 25, 60};
      p.kv_lengths = {12, 35};
      CheckSequencesCall(context, p, seed++, true);
    }
  }
}

TEST_CASE("atomic dQ (deterministic = false) with ragged batches, KV lengths and the bshd layout",
          "[backward][sequences][atomic]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 7300;
  for (bool causal : {false, true}) {
    AttentionParams p = MakeParams({4, 4, 2, 86, 87, 64}, DataType::kFloat16, causal);
    p.deterministic = false;  // the float16 tensor-core backward sums dQ with atomics where the device can
    p.layout = TensorLayout::kBshd;
    p.cu_seqlens_q = {0, 17, 17, 81, 86};
    p.cu_seqlens_k = {0, 20, 23, 87, 87};
    auto choice = context.ChooseBackwardKernels(p);
    REQUIRE(choice.ok());
    REQUIRE(choice->atomic_dq == ExpectAtomicDq(context, p));
    CheckSequencesCall(context, p, seed++, true);
    p = MakeParams({3, 8, 2, 40, 130, 128}, DataType::kFloat16, causal);
    p.deterministic = false;
    p.kv_lengths = {130, 0, 61};
    choice = context.ChooseBackwardKernels(p);
    REQUIRE(choice.ok());
    REQUIRE(choice->atomic_dq == ExpectAtomicDq(context, p));
    CheckSequencesCall(context, p, seed++, true);
  }
}

TEST_CASE("varlen forward equals separate calls per sequence, and reruns are bit-identical", "[forward][sequences]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams p = MakeParams({3, 4, 4, 200, 300, 64}, DataType::kFloat16, true);
  p.layout = TensorLayout::kBshd;
  p.cu_seqlens_q = {0, 100, 101, 200};
  p.cu_seqlens_k = {0, 150, 151, 300};
  const std::vector<Sequence> seqs = SequencesOf(p);
  const Placement q = Place(p, {}, false, 0), k = Place(p, {}, true, 0);
  const auto q_rows = [&](uint32_t b) { return std::pair<uint32_t, uint32_t>{seqs[b].q_row0, seqs[b].q_len}; };
  const auto kv_rows = [&](uint32_t b) { return std::pair<uint32_t, uint32_t>{seqs[b].kv_row0, seqs[b].kv_len}; };
  std::vector<float> q_host = RandomValues(q.elements, p.dtype, 7300), k_host = RandomValues(k.elements, p.dtype, 7301),
                     v_host = RandomValues(k.elements, p.dtype, 7302);
  DeviceTensor q_dev = Upload(context, q_host, p.dtype, 0), k_dev = Upload(context, k_host, p.dtype, 0),
               v_dev = Upload(context, v_host, p.dtype, 0);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    DeviceTensor o_dev = Upload(context, std::vector<float>(q.elements, kPoison), p.dtype, 0);
    REQUIRE(context.Forward(p, {q_dev.view, k_dev.view, v_dev.view, o_dev.view, {}, {}}).ok());
    runs.push_back(Download(context, o_dev, p.dtype));
  }
  REQUIRE(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)) == 0);
  const auto o_seq = Gather(p, q, p.shape.q_heads, runs[0], q_rows);
  const auto q_seq = Gather(p, q, p.shape.q_heads, q_host, q_rows);
  const auto k_seq = Gather(p, k, p.shape.kv_heads, k_host, kv_rows), v_seq = Gather(p, k, p.shape.kv_heads, v_host, kv_rows);
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    const ForwardRun alone = RunForwardWith(context, SequenceParams(p, seqs[b]), q_seq[b], k_seq[b], v_seq[b]);
    std::vector<double> expected(alone.o.begin(), alone.o.end());
    INFO("sequence " << b);
    REQUIRE(tools::RelativeError(o_seq[b], expected) <= ForwardTolerance(p.dtype));
  }
  RequireNoValidationMessages();
}

TEST_CASE("sequences and strides in chunks (a driver's loop budget), with descriptor sets, and mobile limits",
          "[forward][backward][sequences][window][knobs]") {
  uint32_t seed = 7400;
  for (Knobs knobs : {Knobs::kSmallLoopBudget, Knobs::kNoPushDescriptors, Knobs::kMobile}) {
    INFO(KnobsName(knobs));
    Context& context = SharedContext(knobs);
    for (bool causal : {false, true}) {
      // Without a window, then with one: each sequence's window sits at its own diagonal, and the
      // chunks start where its rows' keys do.
      for (bool windowed : {false, true}) {
        // Long enough that every loop runs in several chunks under the budget (decode: in parts).
        AttentionParams p = MakeParams({3, 4, 2, 300, 700, 64}, DataType::kFloat16, causal);
        if (windowed) p.window = {150, causal ? -1 : 40};
        p.layout = TensorLayout::kBshd;
        p.cu_seqlens_q = {0, 120, 120, 300};
        p.cu_seqlens_k = {0, 400, 450, 700};
        p.kv_lengths = {400, 0, 200};
        CheckSequencesCall(context, p, seed++, true);
        p = MakeParams({2, 8, 2, 1, 5000, 64}, DataType::kFloat16, causal);
        if (windowed) p.window = {700, causal ? -1 : 0};
        p.kv_lengths = {4999, 2100};
        CheckSequencesCall(context, p, seed++, false);
      }
    }
  }
}

TEST_CASE("strides and sequences: bad input gets a clear error and no output", "[api][sequences]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams p = MakeParams({2, 2, 1, 8, 16, 16}, DataType::kFloat32, false);
  const uint64_t q_bytes = p.shape.q_elements() * 4, kv_bytes = p.shape.kv_elements() * 4;
  auto q = context.CreateBuffer(q_bytes), k = context.CreateBuffer(kv_bytes), v = context.CreateBuffer(kv_bytes),
       o = context.CreateBuffer(q_bytes);
  REQUIRE((q.ok() && k.ok() && v.ok() && o.ok()));
  const std::vector<float> poison(p.shape.q_elements(), kPoison);
  REQUIRE(context.Upload(o->view(), poison.data(), q_bytes).ok());
  const ForwardBuffers buffers{q->view(), k->view(), v->view(), o->view(), {}, {}};
  // `params_alone`: the params are wrong whatever the buffers (ForwardWorkspaceBytes fails too).
  const auto expect_error = [&](const AttentionParams& bad, const std::string& words, bool params_alone = true) {
    const Status status = context.Forward(bad, buffers);
    INFO(status.ToString());
    REQUIRE(!status.ok());
    REQUIRE(status.message().find(words) != std::string::npos);
    if (params_alone) REQUIRE(!context.ForwardWorkspaceBytes(bad).ok());
  };
  AttentionParams bad = p;
  bad.q_strides = TensorStrides{8 * 16 * 2, 8, 16};  // heads 8 elements apart, rows of 16: overlap
  expect_error(bad, "overlap");
  bad = p;
  bad.k_strides = TensorStrides{2 * 16 * 16, 16 * 16, 16 * 2};  // rows twice as far apart: past the buffer
  expect_error(bad, "holds", /*params_alone=*/false);
  bad = p;
  bad.kv_lengths = {16, 17};  // past the 16 rows K holds
  expect_error(bad, "kv_lengths[1]");
  bad = p;
  bad.kv_lengths = {-1, 3};
  expect_error(bad, "kv_lengths[0]");
  bad = p;
  bad.kv_lengths = {16};  // batch is 2
  expect_error(bad, "entries");
  bad = p;
  bad.cu_seqlens_q = {0, 5, 3};  // not increasing
  expect_error(bad, "not increasing");
  bad = p;
  bad.cu_seqlens_q = {0, 5, 9};  // past the 8 rows Q holds
  expect_error(bad, "past the 8 rows");
  bad = p;
  bad.cu_seqlens_k = {0, 16};  // batch + 1 = 3 entries needed
  expect_error(bad, "entries");
  bad = p;
  bad.cu_seqlens_k = {-2, 0, 4};
  expect_error(bad, "negative");
  // RecordForward of a call with sequences needs the workspace that holds them.
  AttentionParams with_lengths = p;
  with_lengths.kv_lengths = {16, 3};
  auto workspace = context.ForwardWorkspaceBytes(with_lengths);
  REQUIRE(workspace.ok());
  REQUIRE(*workspace >= 2 * 5 * sizeof(uint32_t));
  std::vector<float> after(p.shape.q_elements());
  REQUIRE(context.Download(o->view(), after.data(), q_bytes).ok());
  REQUIRE(std::all_of(after.begin(), after.end(), [](float x) { return x == kPoison; }));
  RequireNoValidationMessages();
}
