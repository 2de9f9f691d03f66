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
constexpr float kPoison = 1000.0f;  // what outputs hold before the call (exact in float16)

// Elements of `host` outside every row `rows` names must still hold `fill`.
void RequireUntouchedOutside(const AttentionParams& p, const Placement& t, uint32_t heads, const std::vector<float>& host,
                             const SequenceRows& rows, float fill, const char* name) {
  std::vector<char> inside(host.size(), 0);
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    const auto [row0, count] = rows[b];
    for (uint32_t h = 0; h < heads; ++h)
      for (uint32_t n = 0; n < count; ++n) std::fill_n(inside.begin() + t.At(b, h, row0 + n), p.shape.head_dim, 1);
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

// The first `count` elements of `buffer` (which holds at least 4 bytes, even for none).
std::vector<float> Downloaded(Context& context, const Buffer& buffer, DataType dtype, uint64_t count) {
  std::vector<uint8_t> bytes(buffer.size());
  REQUIRE(context.Download(buffer.view(), bytes.data(), bytes.size()).ok());
  std::vector<float> values = tools::UnpackTensor(bytes, dtype);
  REQUIRE(values.size() >= count);
  values.resize(count);
  return values;
}

}  // namespace

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

SequenceRows QueryRows(const std::vector<Sequence>& seqs) {
  SequenceRows rows;
  for (const Sequence& s : seqs) rows.emplace_back(s.q_row0, s.q_len);
  return rows;
}
SequenceRows UsedKeyRows(const std::vector<Sequence>& seqs) {
  SequenceRows rows;
  for (const Sequence& s : seqs) rows.emplace_back(s.kv_row0, s.kv_len);
  return rows;
}
SequenceRows OwnedKeyRows(const std::vector<Sequence>& seqs) {
  SequenceRows rows;
  for (const Sequence& s : seqs) rows.emplace_back(s.kv_row0, s.kv_rows);
  return rows;
}

void Scatter(const AttentionParams& p, const Placement& t, uint32_t heads, const std::vector<std::vector<float>>& values,
             const SequenceRows& rows, std::vector<float>* host) {
  const uint32_t d = p.shape.head_dim;
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    const auto [row0, count] = rows[b];
    for (uint32_t h = 0; h < heads; ++h)
      for (uint32_t n = 0; n < count; ++n)
        for (uint32_t c = 0; c < d; ++c) (*host)[t.At(b, h, row0 + n) + c] = values[b][(uint64_t(h) * count + n) * d + c];
  }
}

std::vector<std::vector<float>> Gather(const AttentionParams& p, const Placement& t, uint32_t heads,
                                       const std::vector<float>& host, const SequenceRows& rows) {
  const uint32_t d = p.shape.head_dim;
  std::vector<std::vector<float>> out(p.shape.batch);
  for (uint32_t b = 0; b < p.shape.batch; ++b) {
    const auto [row0, count] = rows[b];
    out[b].resize(uint64_t(heads) * count * d);
    for (uint32_t h = 0; h < heads; ++h)
      for (uint32_t n = 0; n < count; ++n)
        for (uint32_t c = 0; c < d; ++c) out[b][(uint64_t(h) * count + n) * d + c] = host[t.At(b, h, row0 + n) + c];
  }
  return out;
}

DeviceTensor UploadTensor(Context& context, const std::vector<float>& host, DataType dtype, uint64_t offset_elements) {
  DeviceTensor t;
  t.buffer = UploadedBuffer(context, tools::PackTensor(host, dtype));
  const VkDeviceSize offset = offset_elements * DataTypeSize(dtype);
  t.view = {t.buffer.handle(), offset, t.buffer.size() - offset};
  return t;
}

std::vector<float> DownloadTensor(Context& context, const DeviceTensor& t, DataType dtype) {
  return Downloaded(context, t.buffer, dtype, t.buffer.size() / DataTypeSize(dtype));
}

AttentionParams SequenceParams(const AttentionParams& p, const Sequence& seq) {
  const AttentionShape& s = p.shape;
  AttentionParams one = MakeParams({1, s.q_heads, s.kv_heads, seq.q_len, seq.kv_len, s.head_dim}, p.dtype, p.causal);
  one.window = p.window;
  one.scale = p.scale;
  one.softcap = p.softcap;
  one.alibi = p.alibi == AlibiSlopes::kNone ? AlibiSlopes::kNone : AlibiSlopes::kPerHead;
  one.sinks = p.sinks;
  if (p.mask.type != MaskType::kNone) one.mask = {p.mask.type, false, p.mask.heads, p.mask.rows, p.mask.keys};
  return one;
}

void CheckSequencesAgainstReference(Context& context, const AttentionParams& p, const ScoreValues& values,
                                    uint32_t seed, bool backward) {
  INFO(Describe(p) << (p.layout == TensorLayout::kBshd ? " bshd" : "") << (p.kv_lengths.empty() ? "" : " kv_lengths")
                   << (p.cu_seqlens_q.empty() ? "" : " cu_q") << (p.cu_seqlens_k.empty() ? "" : " cu_k"));
  const AttentionShape& s = p.shape;
  const uint32_t d = s.head_dim, hq = s.q_heads, hkv = s.kv_heads;
  const std::vector<Sequence> seqs = SequencesOf(p);
  if (p.mask.type != MaskType::kNone) REQUIRE(MaskBroadcastShape(p) == ExpectedMaskShape(p));
  const uint64_t offset = ViewAlignment(context) / DataTypeSize(p.dtype) * 3;  // a slice past the buffer's start
  const Placement q = Place(p, p.q_strides, false, offset), k = Place(p, p.k_strides, true, offset),
                  v = Place(p, p.v_strides, true, offset), o = Place(p, p.o_strides, false, offset),
                  d_o = Place(p, p.d_o_strides, false, offset);
  const SequenceRows q_rows = QueryRows(seqs), kv_used = UsedKeyRows(seqs), kv_owned = OwnedKeyRows(seqs);

  // Inputs: per sequence, random; everywhere else NaN.
  std::vector<std::vector<float>> q_seq, k_seq, v_seq, do_seq;
  for (uint32_t b = 0; b < s.batch; ++b) {
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

  DeviceTensor q_dev = UploadTensor(context, q_host, p.dtype, offset), k_dev = UploadTensor(context, k_host, p.dtype, offset),
               v_dev = UploadTensor(context, v_host, p.dtype, offset),
               o_dev = UploadTensor(context, std::vector<float>(o.elements, kPoison), p.dtype, offset);
  const bool ragged_q = !p.cu_seqlens_q.empty();
  const uint64_t lse_elements = uint64_t(ragged_q ? 1 : s.batch) * hq * s.q_len + 64;
  DeviceTensor lse_dev = UploadTensor(context, std::vector<float>(lse_elements, kPoison), DataType::kFloat32, 0);
  Buffer mask_buf = UploadedMask(context, p, values.mask);
  Buffer slopes_buf = UploadedFloats(context, values.alibi_slopes), sinks_buf = UploadedFloats(context, values.sinks);
  ForwardBuffers fwd{q_dev.view, k_dev.view, v_dev.view, o_dev.view, lse_dev.view, {}};
  if (p.mask.type != MaskType::kNone) fwd.mask = mask_buf.view();
  if (p.alibi != AlibiSlopes::kNone) fwd.alibi_slopes = slopes_buf.view();
  if (p.sinks) fwd.sinks = sinks_buf.view();
  const Status forward = context.Forward(p, fwd);
  INFO("forward: " << forward.ToString());
  REQUIRE(forward.ok());
  RequireNoValidationMessages();
  const std::vector<float> o_host = DownloadTensor(context, o_dev, p.dtype);
  const std::vector<float> lse_host = DownloadTensor(context, lse_dev, DataType::kFloat32);
  RequireUntouchedOutside(p, o, hq, o_host, q_rows, kPoison, "O");
  const auto o_seq = Gather(p, o, hq, o_host, q_rows);

  std::vector<float> dsinks, dbias;
  std::vector<std::vector<float>> dq_seq, dk_owned, dv_owned;
  if (backward) {
    DeviceTensor do_dev = UploadTensor(context, do_host, p.dtype, offset),
                 dq_dev = UploadTensor(context, std::vector<float>(q.elements, kPoison), p.dtype, offset),
                 dk_dev = UploadTensor(context, std::vector<float>(k.elements, kPoison), p.dtype, offset),
                 dv_dev = UploadTensor(context, std::vector<float>(v.elements, kPoison), p.dtype, offset);
    Buffer dsinks_buf = UploadedFloats(context, std::vector<float>(p.sinks ? hq : 0, kNaN));
    Buffer dbias_buf = UploadedFloats(context, std::vector<float>(MaskElements(p), kNaN));
    BackwardBuffers bwd{q_dev.view, k_dev.view, v_dev.view, o_dev.view, lse_dev.view, do_dev.view,
                        dq_dev.view, dk_dev.view, dv_dev.view, {}};
    bwd.mask = fwd.mask;
    bwd.alibi_slopes = fwd.alibi_slopes;
    bwd.sinks = fwd.sinks;
    if (p.sinks) bwd.dsinks = dsinks_buf.view();
    if (p.mask.additive()) bwd.dbias = dbias_buf.view();
    const Status backward_status = context.Backward(p, bwd);
    INFO("backward: " << backward_status.ToString());
    REQUIRE(backward_status.ok());
    RequireNoValidationMessages();
    const std::vector<float> dq_host = DownloadTensor(context, dq_dev, p.dtype),
                             dk_host = DownloadTensor(context, dk_dev, p.dtype),
                             dv_host = DownloadTensor(context, dv_dev, p.dtype);
    // dQ has Q's strides, dK and dV K's and V's; the rows a sequence owns but does not attend to
    // are written (zeros, below), the others untouched.
    RequireUntouchedOutside(p, q, hq, dq_host, q_rows, kPoison, "dQ");
    RequireUntouchedOutside(p, k, hkv, dk_host, kv_owned, kPoison, "dK");
    RequireUntouchedOutside(p, v, hkv, dv_host, kv_owned, kPoison, "dV");
    dq_seq = Gather(p, q, hq, dq_host, q_rows);
    dk_owned = Gather(p, k, hkv, dk_host, kv_owned);
    dv_owned = Gather(p, v, hkv, dv_host, kv_owned);
    if (p.sinks) dsinks = Downloaded(context, dsinks_buf, DataType::kFloat32, hq);
    if (p.mask.additive()) dbias = Downloaded(context, dbias_buf, DataType::kFloat32, MaskElements(p));
  }

  // Each sequence alone, with its slopes and its part of the mask, in the float64 reference; the
  // sinks' and the bias's gradients summed over the sequences (into `total`).
  tools::ReferenceBackward total;
  total.dsinks.assign(p.sinks ? hq : 0, 0.0);
  total.dsinks_terms = total.dsinks;
  total.dbias.assign(MaskElements(p), 0.0);
  total.dbias_terms = total.dbias;
  if (p.dtype == DataType::kFloat16) {
    total.dsinks_storage_allowance = total.dsinks;
    total.dbias_storage_allowance = total.dbias;
  }
  std::vector<bool> dbias_covered(MaskElements(p), false);
  for (uint32_t b = 0; b < s.batch; ++b) {
    const Sequence& seq = seqs[b];
    INFO("sequence " << b << ": Nq " << seq.q_len << ", Nk " << seq.kv_len << " of " << seq.kv_rows << " rows");
    const AttentionParams one = SequenceParams(p, seq);
    const uint32_t mask_heads = p.mask.heads ? hq : 1, mask_rows = p.mask.rows ? seq.q_len : 1,
                   mask_keys = p.mask.keys ? seq.kv_len : 1;
    tools::ReferenceVariants one_values;
    one_values.sinks = values.sinks;
    if (p.alibi != AlibiSlopes::kNone) {
      const uint32_t first = p.alibi == AlibiSlopes::kPerBatchHead ? b * hq : 0;
      one_values.alibi_slopes.assign(values.alibi_slopes.begin() + first, values.alibi_slopes.begin() + first + hq);
    }
    one_values.mask.resize(MaskElements(one));
    for (uint32_t h = 0; h < mask_heads && p.mask.type != MaskType::kNone; ++h)
      for (uint32_t i = 0; i < mask_rows; ++i)
        for (uint32_t j = 0; j < mask_keys; ++j)
          one_values.mask[tools::MaskIndex(one, 0, h, i, j)] = values.mask[BroadcastMaskIndex(p, b, h, i, j)];

    // Forward: O and LSE; rows that see no key (the reference's O exactly 0) exactly 0, and LSE
    // -inf or the sink.
    std::vector<float> lse_seq;
    for (uint32_t h = 0; h < hq; ++h)
      for (uint32_t n = 0; n < seq.q_len; ++n)
        lse_seq.push_back(lse_host[ragged_q ? uint64_t(h) * s.q_len + seq.q_row0 + n : (uint64_t(b) * hq + h) * s.q_len + n]);
    const tools::ReferenceForward ref = tools::ReferenceAttentionForward(one, q_seq[b], k_seq[b], v_seq[b], one_values);
    CHECK(tools::StoredRelativeError(o_seq[b], ref.o, p.dtype) <= ForwardTolerance(p.dtype));
    CHECK(tools::RelativeError(lse_seq, ref.lse) <= ForwardTolerance(p.dtype));
    for (uint64_t row = 0; row < lse_seq.size(); ++row) {
      const auto first = ref.o.begin() + row * d, last = first + d;
      if (std::any_of(first, last, [](double x) { return x != 0.0; })) continue;
      INFO("row " << row % seq.q_len << " of head " << row / seq.q_len << " sees no key");
      REQUIRE(std::all_of(o_seq[b].begin() + row * d, o_seq[b].begin() + (row + 1) * d, [](float x) { return x == 0.0f; }));
      if (p.sinks) REQUIRE(IsSinkLse(lse_seq[row], values.sinks[row / seq.q_len]));
      else REQUIRE((std::isinf(lse_seq[row]) && lse_seq[row] < 0));
    }
    if (!backward) continue;

    // Backward: dQ; dK and dV over the keys attended to, exactly 0 over the other rows owned (all
    // of them where the sequence has no query).
    const tools::ReferenceBackward grads =
        tools::ReferenceAttentionBackward(one, q_seq[b], k_seq[b], v_seq[b], do_seq[b], one_values);
    std::vector<float> dk_used, dv_used;
    uint64_t unused_nonzero = 0;
    for (uint32_t h = 0; h < hkv; ++h)
      for (uint32_t n = 0; n < seq.kv_rows; ++n)
        for (uint32_t c = 0; c < d; ++c) {
          const uint64_t at = (uint64_t(h) * seq.kv_rows + n) * d + c;
          if (n < seq.kv_len && seq.q_len > 0) {
            dk_used.push_back(dk_owned[b][at]);
            dv_used.push_back(dv_owned[b][at]);
          } else {
            unused_nonzero += dk_owned[b][at] != 0.0f || dv_owned[b][at] != 0.0f;
          }
        }
    CHECK(unused_nonzero == 0);
    if (seq.q_len == 0) continue;
    CHECK(tools::StoredRelativeError(dq_seq[b], grads.dq, p.dtype) <= BackwardTolerance(p.dtype));
    CHECK(tools::StoredRelativeError(dk_used, grads.dk, p.dtype) <= BackwardTolerance(p.dtype));
    CHECK(tools::StoredRelativeError(dv_used, grads.dv, p.dtype) <= BackwardTolerance(p.dtype));
    for (uint32_t h = 0; h < total.dsinks.size(); ++h) {
      total.dsinks[h] += grads.dsinks[h];
      total.dsinks_terms[h] += grads.dsinks_terms[h];
      if (!total.dsinks_storage_allowance.empty()) total.dsinks_storage_allowance[h] += grads.dsinks_storage_allowance[h];
    }
    if (!p.mask.additive()) continue;
    for (uint32_t h = 0; h < mask_heads; ++h)
      for (uint32_t i = 0; i < mask_rows; ++i)
        for (uint32_t j = 0; j < mask_keys; ++j) {
          const uint64_t at = BroadcastMaskIndex(p, b, h, i, j), one_at = tools::MaskIndex(one, 0, h, i, j);
          total.dbias[at] += grads.dbias[one_at];
          total.dbias_terms[at] += grads.dbias_terms[one_at];
          if (!total.dbias_storage_allowance.empty()) total.dbias_storage_allowance[at] += grads.dbias_storage_allowance[one_at];
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
