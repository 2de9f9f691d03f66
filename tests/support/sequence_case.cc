#include "sequence_case.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference_attention.h"
#include "storage_bytes.h"
#include "support/mask_values.h"
#include "support/validated_context.h"

namespace vkflash::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Where element (h, row, d) of a packed tensor of sequence b is: ragged tensors are [H, total, D],
// the others [B, H, N, D].
uint64_t TensorIndex(bool ragged, uint32_t batch_rows, uint32_t heads, uint32_t head_dim, uint32_t b, uint32_t h,
                     uint32_t row, uint32_t d) {
  const uint64_t head_rows = ragged ? uint64_t(h) : uint64_t(b) * heads + h;
  return (head_rows * batch_rows + row) * head_dim + d;
}

// The first `count` elements of `buffer` (which holds at least 4 bytes, even for none).
std::vector<float> Downloaded(Context& context, const Buffer& buffer, DataType dtype, uint64_t count) {
  std::vector<uint8_t> bytes(buffer.size());
  REQUIRE(context.Download(buffer.view(), bytes.data(), bytes.size()).ok());
  std::vector<float> values = tools::UnpackTensor(bytes, dtype);
  REQUIRE(values.size() >= count);
  values.resize(count);
  return values;
}

// What the call computes for sequence b alone: one batch entry of its own lengths, the same
// variants, its slopes, and its part of the mask (no batch dimension, its own rows and keys).
AttentionParams SequenceParams(const AttentionParams& p, const Sequence& seq) {
  const AttentionShape& s = p.shape;
  AttentionParams one = MakeParams({1, s.q_heads, s.kv_heads, seq.q_len, seq.kv_len, s.head_dim}, p.dtype, p.causal);
  one.window = p.window;
  one.scale = p.effective_scale();
  one.softcap = p.softcap;
  one.alibi = p.alibi == AlibiSlopes::kNone ? AlibiSlopes::kNone : AlibiSlopes::kPerHead;
  one.sinks = p.sinks;
  if (p.mask.type != MaskType::kNone) one.mask = {p.mask.type, false, p.mask.heads, p.mask.rows, p.mask.keys};
  return one;
}

}  // namespace

void CheckSequencesAgainstReference(Context& context, const AttentionParams& p, const ScoreValues& values,
                                    uint32_t seed, bool backward) {
  INFO(Describe(p) << (p.kv_lengths.empty() ? "" : " kv_lengths") << (p.cu_seqlens_q.empty() ? "" : " cu_q")
                   << (p.cu_seqlens_k.empty() ? "" : " cu_k"));
  const AttentionShape& s = p.shape;
  const bool ragged_q = !p.cu_seqlens_q.empty(), ragged_k = !p.cu_seqlens_k.empty();
  const std::vector<Sequence> seqs = SequencesOf(p);
  if (p.mask.type != MaskType::kNone) REQUIRE(MaskBroadcastShape(p) == ExpectedMaskShape(p));
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

  Buffer q_buf = UploadedBuffer(context, tools::PackTensor(q, p.dtype));
  Buffer k_buf = UploadedBuffer(context, tools::PackTensor(k, p.dtype));
  Buffer v_buf = UploadedBuffer(context, tools::PackTensor(v, p.dtype));
  Buffer o_buf = UploadedBuffer(context, tools::PackTensor(std::vector<float>(q_elements, kNaN), p.dtype));
  Buffer lse_buf = UploadedFloats(context, std::vector<float>(lse_elements, kNaN));
  Buffer mask_buf = UploadedMask(context, p, values.mask);
  Buffer slopes_buf = UploadedFloats(context, values.alibi_slopes), sinks_buf = UploadedFloats(context, values.sinks);
  ForwardBuffers f{q_buf.view(), k_buf.view(), v_buf.view(), o_buf.view(), lse_buf.view()};
  if (p.mask.type != MaskType::kNone) f.mask = mask_buf.view();
  if (p.alibi != AlibiSlopes::kNone) f.alibi_slopes = slopes_buf.view();
  if (p.sinks) f.sinks = sinks_buf.view();
  REQUIRE(context.Forward(p, f).ok());
  RequireNoValidationMessages();
  const std::vector<float> o = Downloaded(context, o_buf, p.dtype, q_elements);
  const std::vector<float> lse = Downloaded(context, lse_buf, DataType::kFloat32, lse_elements);

  std::vector<float> dq, dk, dv, dsinks, dbias;
  if (backward) {
    Buffer do_buf = UploadedBuffer(context, tools::PackTensor(d_o, p.dtype));
    Buffer dq_buf = UploadedBuffer(context, tools::PackTensor(std::vector<float>(q_elements, kNaN), p.dtype));
    Buffer dk_buf = UploadedBuffer(context, tools::PackTensor(std::vector<float>(kv_elements, kNaN), p.dtype));
    Buffer dv_buf = UploadedBuffer(context, tools::PackTensor(std::vector<float>(kv_elements, kNaN), p.dtype));
    Buffer dsinks_buf = UploadedFloats(context, std::vector<float>(p.sinks ? s.q_heads : 0, kNaN));
    Buffer dbias_buf = UploadedFloats(context, std::vector<float>(MaskElements(p), kNaN));
    BackwardBuffers g{q_buf.view(), k_buf.view(), v_buf.view(), o_buf.view(), lse_buf.view(), do_buf.view(),
                      dq_buf.view(), dk_buf.view(), dv_buf.view()};
    g.mask = f.mask;
    g.alibi_slopes = f.alibi_slopes;
    g.sinks = f.sinks;
    if (p.sinks) g.dsinks = dsinks_buf.view();
    if (p.mask.additive()) g.dbias = dbias_buf.view();
    REQUIRE(context.Backward(p, g).ok());
    RequireNoValidationMessages();
    dq = Downloaded(context, dq_buf, p.dtype, q_elements);
    dk = Downloaded(context, dk_buf, p.dtype, kv_elements);
    dv = Downloaded(context, dv_buf, p.dtype, kv_elements);
    if (p.sinks) dsinks = Downloaded(context, dsinks_buf, DataType::kFloat32, s.q_heads);
    if (p.mask.additive()) dbias = Downloaded(context, dbias_buf, DataType::kFloat32, MaskElements(p));
  }

  // Each sequence alone, with its slopes and its part of the mask, in the float64 reference; the
  // sinks' and the bias's gradients summed over the sequences (into `total`).
  tools::ReferenceBackward total;
  total.dsinks.assign(p.sinks ? s.q_heads : 0, 0.0);
  total.dsinks_terms = total.dsinks;
  total.dbias.assign(MaskElements(p), 0.0);
  total.dbias_terms = total.dbias;
  std::vector<bool> dbias_covered(MaskElements(p), false);
  for (uint32_t b = 0; b < s.batch; ++b) {
    const Sequence& seq = seqs[b];
    INFO("sequence " << b << ": Nq " << seq.q_len << ", Nk " << seq.kv_len << " of " << seq.kv_rows << " rows");
    // The backward writes zero dK and dV where no query of the sequence reaches: its rows past its
    // length, and every row of a sequence without queries.
    uint64_t nonzero_unreached = 0;
    for (uint32_t h = 0; h < s.kv_heads && backward; ++h)
      for (uint32_t j = seq.q_len == 0 ? 0 : seq.kv_len; j < seq.kv_rows; ++j)
        for (uint32_t d = 0; d < s.head_dim; ++d)
          nonzero_unreached += dk[kv_at(b, h, j, d)] != 0.0f || dv[kv_at(b, h, j, d)] != 0.0f;
    CHECK(nonzero_unreached == 0);
    if (seq.q_len == 0) continue;
    const AttentionParams one = SequenceParams(p, seq);
    const uint32_t mask_heads = p.mask.heads ? s.q_heads : 1, mask_rows = p.mask.rows ? seq.q_len : 1,
                   mask_keys = p.mask.keys ? seq.kv_len : 1;
    tools::ReferenceVariants one_values;
    one_values.sinks = values.sinks;
    if (p.alibi != AlibiSlopes::kNone) {
      const uint32_t first = p.alibi == AlibiSlopes::kPerBatchHead ? b * s.q_heads : 0;
      one_values.alibi_slopes.assign(values.alibi_slopes.begin() + first,
                                     values.alibi_slopes.begin() + first + s.q_heads);
    }
    one_values.mask.resize(MaskElements(one));
    for (uint32_t h = 0; h < mask_heads && p.mask.type != MaskType::kNone; ++h)
      for (uint32_t i = 0; i < mask_rows; ++i)
        for (uint32_t j = 0; j < mask_keys; ++j)
          one_values.mask[tools::MaskIndex(one, 0, h, i, j)] = values.mask[BroadcastMaskIndex(p, b, h, i, j)];
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
    const tools::ReferenceForward ref = tools::ReferenceAttentionForward(one, q_one, k_one, v_one, one_values);
    CHECK(tools::RelativeError(o_one, ref.o) <= ForwardTolerance(p.dtype));
    CHECK(tools::RelativeError(lse_one, ref.lse) <= ForwardTolerance(p.dtype));
    // Rows that see no key (the reference's O exactly 0): exactly 0, and LSE -inf or the sink.
    for (uint64_t row = 0; row < lse_one.size(); ++row) {
      const auto first = ref.o.begin() + row * s.head_dim, last = first + s.head_dim;
      if (std::any_of(first, last, [](double x) { return x != 0.0; })) continue;
      INFO("row " << row % seq.q_len << " of head " << row / seq.q_len << " sees no key");
      REQUIRE(std::all_of(o_one.begin() + row * s.head_dim, o_one.begin() + (row + 1) * s.head_dim,
                          [](float x) { return x == 0.0f; }));
      if (p.sinks) REQUIRE(IsSinkLse(lse_one[row], values.sinks[row / seq.q_len]));
      else REQUIRE((std::isinf(lse_one[row]) && lse_one[row] < 0));
    }
    if (!backward) continue;
    const tools::ReferenceBackward grads =
        tools::ReferenceAttentionBackward(one, q_one, k_one, v_one, do_one, one_values);
    CHECK(tools::RelativeError(dq_one, grads.dq) <= BackwardTolerance(p.dtype));
    if (seq.kv_len > 0) {
      CHECK(tools::RelativeError(dk_one, grads.dk) <= BackwardTolerance(p.dtype));
      CHECK(tools::RelativeError(dv_one, grads.dv) <= BackwardTolerance(p.dtype));
    }
    for (uint32_t h = 0; h < total.dsinks.size(); ++h) {
      total.dsinks[h] += grads.dsinks[h];
      total.dsinks_terms[h] += grads.dsinks_terms[h];
    }
    if (!p.mask.additive()) continue;
    for (uint32_t h = 0; h < mask_heads; ++h)
      for (uint32_t i = 0; i < mask_rows; ++i)
        for (uint32_t j = 0; j < mask_keys; ++j) {
          const uint64_t at = BroadcastMaskIndex(p, b, h, i, j), one_at = tools::MaskIndex(one, 0, h, i, j);
          total.dbias[at] += grads.dbias[one_at];
          total.dbias_terms[at] += grads.dbias_terms[one_at];
          dbias_covered[at] = true;
        }
  }
  if (backward && p.sinks) CHECK(DsinksError(p.dtype, dsinks, total) <= BackwardTolerance(p.dtype));
  if (backward && p.mask.additive()) {
    CHECK(DbiasError(p, dbias, total) <= BackwardTolerance(p.dtype));
    uint64_t nonzero_uncovered = 0;
    for (uint64_t at = 0; at < dbias.size(); ++at) nonzero_uncovered += !dbias_covered[at] && dbias[at] != 0.0f;
    CHECK(nonzero_uncovered == 0);
  }
}

}  // namespace vkflash::testing
