// Tensors as engines hold them: strides ([B, N, H, D], slices of a larger buffer), KV caches
// filled to different lengths per sequence, and ragged (varlen) batches, forward and backward,
// against the float64 reference of each sequence on its own (support/sequence_case.h, which also
// fills every buffer with NaN wherever no sequence has a row and checks that no output outside
// the sequences' rows changes); the API's checks of strides and sequences.
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
#include "support/sequence_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

constexpr float kPoison = 1000.0f;  // what outputs hold before the call (exact in float16)

// The call checked sequence by sequence (support/sequence_case.h), without score variants.
void CheckSequencesCall(Context& context, const AttentionParams& p, uint32_t seed, bool backward) {
  CheckSequencesAgainstReference(context, p, {}, seed, backward);
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
  const SequenceRows q_rows = QueryRows(seqs), kv_rows = UsedKeyRows(seqs);
  std::vector<float> q_host = RandomValues(q.elements, p.dtype, 7300), k_host = RandomValues(k.elements, p.dtype, 7301),
                     v_host = RandomValues(k.elements, p.dtype, 7302);
  DeviceTensor q_dev = UploadTensor(context, q_host, p.dtype, 0), k_dev = UploadTensor(context, k_host, p.dtype, 0),
               v_dev = UploadTensor(context, v_host, p.dtype, 0);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    DeviceTensor o_dev = UploadTensor(context, std::vector<float>(q.elements, kPoison), p.dtype, 0);
    REQUIRE(context.Forward(p, {q_dev.view, k_dev.view, v_dev.view, o_dev.view, {}, {}}).ok());
    runs.push_back(DownloadTensor(context, o_dev, p.dtype));
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
