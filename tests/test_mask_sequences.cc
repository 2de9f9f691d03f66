// Masks over batches whose sequences differ (docs/design.md, "Sequences"): a KV cache filled to
// different lengths (the mask's Nk is the capacity) and ragged batches (its Nq and Nk are the
// longest sequence's, and sequence b's own row i and key j are element [b, h, i, j]). Each
// sequence against the float64 reference of that sequence alone with its part of the mask,
// forward and backward; the bias's gradient summed over the sequences as the mask broadcasts, and
// exactly 0 where no sequence has the pair. The masks close whole 16 x 16 blocks too, so the
// kernels' tile skipping runs with sequences. K and V rows past a sequence's keys hold NaN.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "half.h"
#include "reference_attention.h"
#include "storage_bytes.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Element (b, h, i, j) of the call's mask, from MaskBroadcastShape (its own derivation of the
// broadcast, not the reference's MaskIndex, which knows nothing of sequences).
uint64_t BroadcastIndex(const AttentionParams& p, uint64_t b, uint64_t h, uint64_t i, uint64_t j) {
  const std::array<uint32_t, 4> full = MaskBroadcastShape(p);
  const AttentionMask& m = p.mask;
  const uint64_t heads = m.heads ? full[1] : 1, rows = m.rows ? full[2] : 1, keys = m.keys ? full[3] : 1;
  return (((m.batch ? b : 0) * heads + (m.heads ? h : 0)) * rows + (m.rows ? i : 0)) * keys + (m.keys ? j : 0);
}

// Where element (h, row, d) of a packed tensor of sequence b is: ragged tensors are [H, total, D],
// the others [B, H, N, D].
uint64_t TensorIndex(bool ragged, uint32_t batch_rows, uint32_t heads, uint32_t head_dim, uint32_t b, uint32_t h,
                     uint32_t row, uint32_t d) {
  const uint64_t head_rows = ragged ? uint64_t(h) : uint64_t(b) * heads + h;
  return (head_rows * batch_rows + row) * head_dim + d;
}

// A mask with about a fifth of its pairs blocked and a third of its 16 x 16 blocks closed.
std::vector<float> SparseMaskValues(const AttentionParams& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::array<uint32_t, 4> full = MaskBroadcastShape(p);
  const AttentionMask& m = p.mask;
  const uint32_t batch = m.batch ? full[0] : 1, heads = m.heads ? full[1] : 1, rows = m.rows ? full[2] : 1,
                 keys = m.keys ? full[3] : 1;
  std::vector<float> values(MaskElements(p));
  for (uint32_t b = 0; b < batch; ++b)
    for (uint32_t h = 0; h < heads; ++h) {
      const uint32_t key_blocks = (keys + 15) / 16;
      std::vector<bool> closed(uint64_t((rows + 15) / 16) * key_blocks);
      for (uint64_t i = 0; i < closed.size(); ++i) closed[i] = uniform(rng) < 0.35f;
      for (uint32_t i = 0; i < rows; ++i)
        for (uint32_t j = 0; j < keys; ++j) {
          const bool blocked = closed[uint64_t(i / 16) * key_blocks + j / 16] || uniform(rng) < 0.2f;
          const float bias = p.mask.type == MaskType::kFloat16 ? tools::RoundToHalf(normal(rng)) : normal(rng);
          values[BroadcastIndex(p, b, h, i, j)] = p.mask.type == MaskType::kBool ? (blocked ? 0.0f : 1.0f)
                                                                                 : (blocked ? -kInf : bias);
        }
    }
  return values;
}

std::vector<float> Downloaded(Context& context, const Buffer& buffer, DataType dtype) {
  std::vector<uint8_t> bytes(buffer.size());
  REQUIRE(context.Download(buffer.view(), bytes.data(), bytes.size()).ok());
  return tools::UnpackTensor(bytes, dtype);
}

void CheckMaskedSequences(Context& context, const AttentionParams& p, uint32_t seed, bool backward) {
  INFO(Describe(p) << MaskName(p.mask) << (p.kv_lengths.empty() ? "" : " kv_lengths")
                   << (p.cu_seqlens_q.empty() ? "" : " cu_q") << (p.cu_seqlens_k.empty() ? "" : " cu_k"));
  const AttentionShape& s = p.shape;
  const bool ragged_q = !p.cu_seqlens_q.empty(), ragged_k = !p.cu_seqlens_k.empty();
  const std::vector<Sequence> seqs = SequencesOf(p);
  const uint64_t q_elements = uint64_t(ragged_q ? 1 : s.batch) * s.q_heads * s.q_len * s.head_dim;
  const uint64_t kv_elements = uint64_t(ragged_k ? 1 : s.batch) * s.kv_heads * s.kv_len * s.head_dim;
  const uint64_t lse_elements = uint64_t(ragged_q ? 1 : s.batch) * s.q_heads * s.q_len;
  auto q_at = [&](uint32_t b, uint32_t h, uint32_t i, uint32_t d) {
    return TensorIndex(ragged_q, s.q_len, s.q_heads, s.head_dim, b, h, seqs[b].q_row0 + i, d);
  };
  auto kv_at = [&](uint32_t b, uint32_t h, uint32_t j, uint32_t d) {
    return TensorIndex(ragged_k, s.kv_len, s.kv_heads, s.head_dim, b, h, seqs[b].kv_row0 + j, d);
  };

  // Inputs: random in every sequence's rows, NaN in K and V rows no sequence attends to.
  std::vector<float> q = RandomValues(q_elements, p.dtype, seed), d_o = RandomValues(q_elements, p.dtype, seed + 1);
  std::vector<float> k(kv_elements, kNaN), v(kv_elements, kNaN);
  const std::vector<float> k_random = RandomValues(kv_elements, p.dtype, seed + 2);
  const std::vector<float> v_random = RandomValues(kv_elements, p.dtype, seed + 3);
  for (uint32_t b = 0; b < s.batch; ++b)
    for (uint32_t h = 0; h < s.kv_heads; ++h)
      for (uint32_t j = 0; j < seqs[b].kv_len; ++j)
        for (uint32_t d = 0; d < s.head_dim; ++d) {
          k[kv_at(b, h, j, d)] = k_random[kv_at(b, h, j, d)];
          v[kv_at(b, h, j, d)] = v_random[kv_at(b, h, j, d)];
        }
  const std::vector<float> mask = SparseMaskValues(p, seed + 4);

  Buffer q_buf = UploadedBuffer(context, tools::PackTensor(q, p.dtype));
  Buffer k_buf = UploadedBuffer(context, tools::PackTensor(k, p.dtype));
  Buffer v_buf = UploadedBuffer(context, tools::PackTensor(v, p.dtype));
  Buffer o_buf = UploadedBuffer(context, tools::PackTensor(std::vector<float>(q_elements, 0.0f), p.dtype));
  Buffer lse_buf = UploadedFloats(context, std::vector<float>(lse_elements, 0.0f));
  Buffer mask_buf = UploadedMask(context, p, mask);
  ForwardBuffers f{q_buf.view(), k_buf.view(), v_buf.view(), o_buf.view(), lse_buf.view()};
  f.mask = mask_buf.view();
  REQUIRE(context.Forward(p, f).ok());
  RequireNoValidationMessages();
  const std::vector<float> o = Downloaded(context, o_buf, p.dtype);
  const std::vector<float> lse = Downloaded(context, lse_buf, DataType::kFloat32);

  std::vector<float> dq, dk, dv, dbias;
  if (backward) {
    Buffer do_buf = UploadedBuffer(context, tools::PackTensor(d_o, p.dtype));
    Buffer dq_buf = UploadedBuffer(context, tools::PackTensor(std::vector<float>(q_elements, kNaN), p.dtype));
    Buffer dk_buf = UploadedBuffer(context, tools::PackTensor(std::vector<float>(kv_elements, kNaN), p.dtype));
    Buffer dv_buf = UploadedBuffer(context, tools::PackTensor(std::vector<float>(kv_elements, kNaN), p.dtype));
    Buffer dbias_buf = UploadedFloats(context, std::vector<float>(MaskElements(p), kNaN));
    BackwardBuffers g{q_buf.view(), k_buf.view(), v_buf.view(), o_buf.view(), lse_buf.view(), do_buf.view(),
                      dq_buf.view(), dk_buf.view(), dv_buf.view()};
    g.mask = mask_buf.view();
    if (p.mask.additive()) g.dbias = dbias_buf.view();
    REQUIRE(context.Backward(p, g).ok());
    RequireNoValidationMessages();
    dq = Downloaded(context, dq_buf, p.dtype);
    dk = Downloaded(context, dk_buf, p.dtype);
    dv = Downloaded(context, dv_buf, p.dtype);
    if (p.mask.additive()) dbias = Downloaded(context, dbias_buf, DataType::kFloat32);
  }

  // Each sequence alone, with its part of the mask, in the float64 reference.
  std::vector<double> dbias_expected(MaskElements(p), 0.0);
  std::vector<bool> dbias_covered(MaskElements(p), false);
  for (uint32_t b = 0; b < s.batch; ++b) {
    const Sequence& seq = seqs[b];
    INFO("sequence " << b << ": Nq " << seq.q_len << ", Nk " << seq.kv_len);
    if (seq.q_len == 0) continue;
    AttentionParams one = MakeParams({1, s.q_heads, s.kv_heads, seq.q_len, seq.kv_len, s.head_dim}, p.dtype, p.causal);
    one.window = p.window;
    one.mask = {p.mask.type, false, p.mask.heads, p.mask.rows, p.mask.keys};
    const uint32_t mask_heads = p.mask.heads ? s.q_heads : 1, mask_rows = p.mask.rows ? seq.q_len : 1,
                   mask_keys = p.mask.keys ? seq.kv_len : 1;
    tools::ReferenceVariants values;
    values.mask.resize(MaskElements(one));
    for (uint32_t h = 0; h < mask_heads; ++h)
      for (uint32_t i = 0; i < mask_rows; ++i)
        for (uint32_t j = 0; j < mask_keys; ++j) values.mask[tools::MaskIndex(one, 0, h, i, j)] = mask[BroadcastIndex(p, b, h, i, j)];
    std::vector<float> q_one, do_one, k_one, v_one, o_one, lse_one, dq_one, dk_one, dv_one;
    for (uint32_t h = 0; h < s.q_heads; ++h)
      for (uint32_t i = 0; i < seq.q_len; ++i) {
        lse_one.push_back(lse[ragged_q ? uint64_t(h) * s.q_len + seq.q_row0 + i : (uint64_t(b) * s.q_heads + h) * s.q_len + i]);
        for (uint32_t d = 0; d < s.head_dim; ++d) {
          q_one.push_back(q[q_at(b, h, i, d)]);
          do_one.push_back(d_o[q_at(b, h, i, d)]);
          o_one.push_back(o[q_at(b, h, i, d)]);
          if (backward) dq_one.push_back(dq[q_at(b, h, i, d)]);
        }
      }
    for (uint32_t h = 0; h < s.kv_heads; ++h)
      for (uint32_t j = 0; j < seq.kv_len; ++j)
        for (uint32_t d = 0; d < s.head_dim; ++d) {
          k_one.push_back(k[kv_at(b, h, j, d)]);
          v_one.push_back(v[kv_at(b, h, j, d)]);
          if (backward) {
            dk_one.push_back(dk[kv_at(b, h, j, d)]);
            dv_one.push_back(dv[kv_at(b, h, j, d)]);
          }
        }
    const tools::ReferenceForward ref = tools::ReferenceAttentionForward(one, q_one, k_one, v_one, values);
    CHECK(tools::RelativeError(o_one, ref.o) <= ForwardTolerance(p.dtype));
    CHECK(tools::RelativeError(lse_one, ref.lse) <= ForwardTolerance(p.dtype));
    if (!backward) continue;
    const tools::ReferenceBackward grads = tools::ReferenceAttentionBackward(one, q_one, k_one, v_one, do_one, values);
    CHECK(tools::RelativeError(dq_one, grads.dq) <= BackwardTolerance(p.dtype));
    if (seq.kv_len > 0) {
      CHECK(tools::RelativeError(dk_one, grads.dk) <= BackwardTolerance(p.dtype));
      CHECK(tools::RelativeError(dv_one, grads.dv) <= BackwardTolerance(p.dtype));
    }
    if (!p.mask.additive()) continue;
    for (uint32_t h = 0; h < mask_heads; ++h)
      for (uint32_t i = 0; i < mask_rows; ++i)
        for (uint32_t j = 0; j < mask_keys; ++j) {
          dbias_expected[BroadcastIndex(p, b, h, i, j)] += grads.dbias[tools::MaskIndex(one, 0, h, i, j)];
          dbias_covered[BroadcastIndex(p, b, h, i, j)] = true;
        }
  }
  if (!dbias.empty()) {
    CHECK(tools::RelativeError(dbias, dbias_expected) <= BackwardTolerance(p.dtype));
    uint64_t nonzero_uncovered = 0;
    for (uint64_t at = 0; at < dbias.size(); ++at) nonzero_uncovered += !dbias_covered[at] && dbias[at] != 0.0f;
    CHECK(nonzero_uncovered == 0);
  }
}

}  // namespace

TEST_CASE("masks with sequences: a KV cache's lengths and ragged batches index the mask by each sequence's rows",
          "[forward][backward][mask][sequences]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 27000;
  for (bool causal : {false, true}) {
    // A cache of 300 keys per sequence filled to 300, 123 and 0: the mask's Nk is the capacity.
    AttentionParams p = MakeParams({3, 4, 2, 37, 300, 32}, DataType::kFloat16, causal);
    p.kv_lengths = {300, 123, 0};
    p.mask = {MaskType::kFloat32, true, true, true, true};
    CheckMaskedSequences(context, p, seed++, true);
    // Decode rows over the same kind of cache, a padding-like mask per sequence.
    p = MakeParams({2, 8, 2, 1, 700, 64}, DataType::kFloat16, causal);
    p.kv_lengths = {700, 321};
    p.mask = {MaskType::kBool, true, false, false, true};
    CheckMaskedSequences(context, p, seed++, false);
    // Ragged queries and keys (one sequence without queries), one mask for every sequence with
    // the longest sequence's Nq x Nk.
    p = MakeParams({3, 4, 2, 105, 260, 64}, DataType::kFloat16, causal);
    p.cu_seqlens_q = {0, 40, 40, 105};
    p.cu_seqlens_k = {0, 50, 170, 260};
    p.mask = {MaskType::kFloat16, false, true, true, true};
    CheckMaskedSequences(context, p, seed++, true);
    // Decode rows of ragged queries (3 and 2 rows: 6 and 4 packed rows of 2 heads), a mask
    // without heads: the register decode kernel packs each sequence's rows by its own q_len, so
    // there every packed row reads its mask terms (DecodeMaskTermRows).
    p = MakeParams({2, 4, 2, 5, 500, 64}, DataType::kFloat16, causal);
    p.cu_seqlens_q = {0, 3, 5};
    p.cu_seqlens_k = {0, 260, 500};
    p.mask = {MaskType::kFloat32, false, false, true, true};
    CheckMaskedSequences(context, p, seed++, false);
    // Ragged keys over per-sequence queries, a mask with the batch dimension.
    p = MakeParams({2, 2, 2, 20, 150, 32}, DataType::kFloat32, causal);
    p.cu_seqlens_k = {0, 70, 150};
    p.mask = {MaskType::kFloat32, true, false, true, true};
    CheckMaskedSequences(context, p, seed++, true);
  }
}
