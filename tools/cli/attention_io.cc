#include "attention_io.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>

#include "storage_bytes.h"

namespace vkflash::cli {
namespace {

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + ")";
}

Status Bad(const std::string& message) { return Status::Error(ErrorCode::kInvalidArgument, message); }

// Device buffers for the slopes, sinks and mask `in` holds (none where unused), kept in `held`.
Status UploadVariantValues(Context& context, const AttentionInputs& in, std::vector<Buffer>* held,
                           BufferView* alibi_slopes, BufferView* sinks, BufferView* mask) {
  for (const auto& [values, view] : {std::pair{&in.alibi_slopes, alibi_slopes}, std::pair{&in.sinks, sinks}}) {
    if (values->empty()) continue;
    auto uploaded = UploadFloats(context, *values, held);
    if (!uploaded.ok()) return uploaded.status();
    *view = *uploaded;
  }
  if (!in.mask.empty()) {
    auto uploaded = UploadBuffer(context, in.mask, in.mask.size());
    if (!uploaded.ok()) return uploaded.status();
    held->push_back(std::move(uploaded).value());
    *mask = held->back().view();
  }
  return Status::Ok();
}

// A float32 .npy of one of `shapes` (the first that matches is returned as its index), or a
// message that names the file, what it holds and what the call needs.
Result<size_t> ReadFloat32Of(const std::string& option, const std::string& path,
                             const std::vector<std::pair<std::vector<uint64_t>, std::string>>& shapes,
                             std::vector<float>* values) {
  auto array = tools::ReadNpy(path);
  if (!array.ok()) return array.status();
  std::string expected;
  for (size_t i = 0; i < shapes.size(); ++i) {
    expected += (i ? " or " : "") + shapes[i].second + " " + ShapeText(shapes[i].first);
    if (array->shape == shapes[i].first) {
      if (array->dtype != DataType::kFloat32) {
        return Bad(option + " '" + path + "' is " + DataTypeName(array->dtype) + "; it must be float32");
      }
      *values = ToFloats(*array);
      return i;
    }
  }
  return Bad(option + " '" + path + "' has shape " + ShapeText(array->shape) + "; this call needs float32 " + expected);
}

}  // namespace

std::string FloatText(float value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

Result<Buffer> UploadBuffer(Context& context, const std::vector<uint8_t>& data, uint64_t bytes) {
  auto buffer = context.CreateBuffer(bytes > 4 ? bytes : 4);
  if (!buffer.ok()) return buffer.status();
  if (!data.empty()) {
    Status uploaded = context.Upload(buffer->view(), data.data(), data.size());
    if (!uploaded.ok()) return uploaded;
  }
  return buffer;
}

Result<BufferView> UploadFloats(Context& context, const std::vector<float>& values, std::vector<Buffer>* held) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  auto buffer = UploadBuffer(context, bytes, bytes.size());
  if (!buffer.ok()) return buffer.status();
  held->push_back(std::move(buffer).value());
  return held->back().view();
}

std::vector<float> ToFloats(const tools::NpyArray& array) { return tools::UnpackTensor(array.data, array.dtype); }

std::vector<float> MaskFloats(const AttentionInputs& in) {
  const uint64_t count = MaskElements(in.params);
  if (in.params.mask.type == MaskType::kBool) {
    std::vector<float> values(count);
    for (uint64_t i = 0; i < count; ++i) values[i] = in.mask[i] != 0 ? 1.0f : 0.0f;
    return values;
  }
  const DataType dtype = in.params.mask.type == MaskType::kFloat16 ? DataType::kFloat16 : DataType::kFloat32;
  return tools::UnpackTensor(std::vector<uint8_t>(in.mask.begin(), in.mask.begin() + count * DataTypeSize(dtype)), dtype);
}

void AddVariantOptions(CLI::App* app, VariantOptions* options, VariantValues values) {
  app->add_flag("--causal", options->causal, "Causal mask, bottom-right aligned (the window -1,0)");
  app->add_option("--window", options->window,
                  "Sliding window L,R: row i sees keys i+Nk-Nq-L ..= i+Nk-Nq+R; -1 = unbounded side");
  app->add_option("--softcap", options->softcap, "Logit softcap C > 0: s = C*tanh(s/C) before the softmax; 0 = none");
  if (values == VariantValues::kFiles) {
    app->add_option("--alibi", options->alibi,
                    "ALiBi slopes, float32 [Hq] or [B, Hq] (.npy): s -= slope*|i+Nk-Nq-j|, after the softcap");
    app->add_option("--sinks", options->sinks,
                    "Attention sinks, float32 [Hq] (.npy): a logit per query head in each row's softmax denominator");
    app->add_option("--mask", options->mask,
                    "Mask (.npy) broadcastable to [B, Hq, Nq, Nk]: float32/float16 added to the scores (-inf blocks a "
                    "pair), or bool (false blocks it)");
  } else {
    app->add_flag("--alibi", options->made_alibi, "ALiBi with the geometric slopes 2^(-8(h+1)/Hq)");
    app->add_flag("--sinks", options->made_sinks, "Attention sinks, random Normal(0, 1) per query head");
    app->add_flag("--mask", options->made_mask,
                  "A bias [1, 1, Nq, Nk] (float32 unless --mask-dtype), random Normal(0, 1), about one pair in ten blocked (-inf)");
    app->add_option("--mask-sparsity", options->mask_sparsity,
                    "With --mask: close this fraction (0-1) of the bias's 128 x 128 blocks entirely, at random");
    app->add_option("--mask-dtype", options->mask_dtype,
                    "With --mask: store it as f32 or f16, or as bool (false where the bias is -inf)")
        ->check(CLI::IsMember({"f32", "f16", "bool"}));
  }
}

Status ApplyVariantOptions(const VariantOptions& options, AttentionParams* params) {
  params->causal = options.causal;
  if (!std::isfinite(options.softcap) || options.softcap < 0.0f) {
    return Bad("--softcap must be a finite number > 0 (0 for none), got " + FloatText(options.softcap));
  }
  params->softcap = options.softcap;
  if (!(options.mask_sparsity >= 0.0f && options.mask_sparsity <= 1.0f)) {
    return Bad("--mask-sparsity must be a fraction from 0 to 1, got " + FloatText(options.mask_sparsity));
  }
  if (options.mask_sparsity > 0.0f && !options.made_mask) return Bad("--mask-sparsity needs --mask");
  if (!options.mask_dtype.empty() && !options.made_mask) return Bad("--mask-dtype needs --mask");
  if (!options.window.empty()) {
    // Two integers and nothing else: "L,R".
    const std::string& text = options.window;
    const size_t comma = text.find(',');
    int32_t sides[2] = {0, 0};
    bool parsed = comma != std::string::npos;
    for (int i = 0; parsed && i < 2; ++i) {
      const std::string part = i == 0 ? text.substr(0, comma) : text.substr(comma + 1);
      size_t used = 0;
      try {
        const long value = std::stol(part, &used);
        parsed = used == part.size() && value >= INT32_MIN && value <= INT32_MAX;
        sides[i] = int32_t(value);
      } catch (const std::exception&) {
        parsed = false;
      }
    }
    if (!parsed) return Bad("--window expects L,R (two integers, -1 for an unbounded side), got '" + text + "'");
    params->window = {sides[0], sides[1]};
  }
  return Status::Ok();
}

Status LoadVariantValues(const VariantOptions& options, AttentionInputs* in) {
  AttentionParams& p = in->params;
  const uint64_t batch = p.shape.batch, heads = p.shape.q_heads;
  if (!options.alibi.empty()) {
    auto shape = ReadFloat32Of("--alibi", options.alibi, {{{heads}, "[Hq]"}, {{batch, heads}, "[B, Hq]"}},
                               &in->alibi_slopes);
    if (!shape.ok()) return shape.status();
    p.alibi = *shape == 0 ? AlibiSlopes::kPerHead : AlibiSlopes::kPerBatchHead;
  }
  if (!options.sinks.empty()) {
    auto shape = ReadFloat32Of("--sinks", options.sinks, {{{heads}, "[Hq]"}}, &in->sinks);
    if (!shape.ok()) return shape.status();
    p.sinks = true;
  }
  if (!options.mask.empty()) {
    auto mask = tools::ReadNpyMask(options.mask);
    if (!mask.ok()) return mask.status();
    // NumPy's broadcasting: aligned at the right, each dimension the call's size or 1.
    const std::array<uint32_t, 4> full = MaskBroadcastShape(p);
    const std::string target = "[B, Hq, Nq, Nk] = " + ShapeText({full[0], full[1], full[2], full[3]});
    const size_t rank = mask->shape.size();
    if (rank > 4) {  // 0-d: one bias for every pair, as NumPy broadcasts a scalar
      return Bad("--mask '" + options.mask + "' has shape " + ShapeText(mask->shape) + "; it must broadcast to " + target);
    }
    bool has[4];
    for (size_t i = 0; i < 4; ++i) {
      const uint64_t size = i + rank < 4 ? 1 : mask->shape[i + rank - 4];
      has[i] = size == full[i];
      if (!has[i] && size != 1) {
        return Bad("--mask '" + options.mask + "' has shape " + ShapeText(mask->shape) + ", which does not broadcast to " +
                   target);
      }
    }
    p.mask = {mask->type, has[0], has[1], has[2], has[3]};
    in->mask = std::move(mask->data);
    in->mask.resize(MaskBytes(p), 0);  // whole words
    in->mask_shape = mask->shape;
  }
  return Status::Ok();
}

std::vector<float> GeometricAlibiSlopes(uint32_t heads) {
  std::vector<float> slopes(heads);
  for (uint32_t h = 0; h < heads; ++h) slopes[h] = float(std::exp2(-8.0 * (h + 1) / heads));
  return slopes;
}

std::vector<float> RandomSinks(uint32_t heads, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> sinks(heads);
  for (float& x : sinks) x = normal(rng);
  return sinks;
}

std::vector<float> RandomBias(uint32_t q_len, uint32_t kv_len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> tenth(0, 9);
  std::vector<float> bias(uint64_t(q_len) * kv_len);
  for (float& x : bias) x = tenth(rng) == 0 ? -std::numeric_limits<float>::infinity() : normal(rng);
  return bias;
}

ClosedBiasBlocks ChooseClosedBiasBlocks(uint32_t q_len, uint32_t kv_len, float fraction, uint32_t seed) {
  constexpr uint32_t kBlock = ClosedBiasBlocks::kSize;
  ClosedBiasBlocks blocks{q_len, kv_len, (kv_len + kBlock - 1) / kBlock, {}};
  const uint64_t count = uint64_t((q_len + kBlock - 1) / kBlock) * blocks.key_blocks;
  std::vector<uint64_t> order(count);
  std::iota(order.begin(), order.end(), uint64_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  blocks.closed.assign(count, false);
  for (uint64_t i = 0; i < uint64_t(std::llround(double(fraction) * count)); ++i) blocks.closed[order[i]] = true;
  return blocks;
}

const char* MaskDtypeName(MaskType type) {
  switch (type) {
    case MaskType::kFloat32: return "f32";
    case MaskType::kFloat16: return "f16";
    case MaskType::kBool: return "bool";
    default: return "";
  }
}

MaskType MadeMaskType(const VariantOptions& options) {
  for (MaskType type : {MaskType::kFloat16, MaskType::kBool}) {
    if (options.mask_dtype == MaskDtypeName(type)) return type;
  }
  return MaskType::kFloat32;
}

std::vector<uint8_t> MaskStorage(const std::vector<float>& bias, MaskType type) {
  if (type != MaskType::kBool) return tools::PackMask(bias, type);
  std::vector<float> allowed(bias.size());
  for (size_t i = 0; i < bias.size(); ++i) allowed[i] = bias[i] == -std::numeric_limits<float>::infinity() ? 0.0f : 1.0f;
  return tools::PackMask(allowed, type);
}

bool ClosedBiasBlocks::Closes(uint32_t row, uint32_t key) const {
  return closed[uint64_t(row / kSize) * key_blocks + key / kSize];
}

void CloseBiasBlocks(const ClosedBiasBlocks& blocks, float* bias) {
  for (uint32_t i = 0; i < blocks.q_len; ++i) {
    for (uint32_t j = 0; j < blocks.kv_len; ++j) {
      if (blocks.Closes(i, j)) bias[uint64_t(i) * blocks.kv_len + j] = -std::numeric_limits<float>::infinity();
    }
  }
}

void MakeVariantValues(const VariantOptions& options, uint32_t seed, AttentionInputs* in) {
  if (options.made_alibi) {
    in->params.alibi = AlibiSlopes::kPerHead;
    in->alibi_slopes = GeometricAlibiSlopes(in->params.shape.q_heads);
  }
  if (options.made_sinks) {
    in->params.sinks = true;
    in->sinks = RandomSinks(in->params.shape.q_heads, seed);
  }
  if (options.made_mask) {
    AttentionParams& p = in->params;
    p.mask = {MadeMaskType(options), false, false, true, true};
    std::vector<float> bias = RandomBias(p.shape.q_len, p.shape.kv_len, seed + 1);
    CloseBiasBlocks(ChooseClosedBiasBlocks(p.shape.q_len, p.shape.kv_len, options.mask_sparsity, seed + 2), bias.data());
    in->mask = MaskStorage(bias, p.mask.type);
    in->mask_shape = {1, 1, p.shape.q_len, p.shape.kv_len};
  }
}

std::string ScoreVariantsText(const AttentionParams& params, char separator) {
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : std::string(1, separator)) + part; };
  if (params.softcap > 0.0f) add("softcap=" + FloatText(params.softcap));
  if (params.alibi == AlibiSlopes::kPerHead) add("alibi");
  if (params.alibi == AlibiSlopes::kPerBatchHead) add("alibi[B,Hq]");
  if (params.sinks) add("sinks");
  if (params.mask.type == MaskType::kFloat32) add("mask");
  if (params.mask.type == MaskType::kFloat16) add("mask=f16");
  if (params.mask.type == MaskType::kBool) add("mask=bool");
  return text;
}

void AddSequenceOptions(CLI::App* app, SequenceOptions* options) {
  app->add_option("--layout", options->layout, "Tensor layout: bhsd [B, H, N, D] or bshd [B, N, H, D]")
      ->check(CLI::IsMember({"bhsd", "bshd"}))
      ->capture_default_str();
  app->add_option("--seqlens-k", options->seqlens_k, "int32 [B]: the keys each sequence uses of K/V's Nk rows");
  app->add_option("--cu-seqlens-q", options->cu_seqlens_q,
                  "int32 [B+1]: ragged queries packed end to end; Q/O/dO/dQ are [total_q, Hq, D], LSE [Hq, total_q]");
  app->add_option("--cu-seqlens-k", options->cu_seqlens_k,
                  "int32 [B+1]: ragged keys packed end to end; K/V/dK/dV are [total_k, Hkv, D]");
}

Result<AttentionInputs> LoadAttentionInputs(const std::string& q_path, const std::string& k_path,
                                            const std::string& v_path, const VariantOptions& variants,
                                            std::optional<float> scale,
                                            const SequenceOptions& sequences) {
  AttentionInputs in;
  AttentionParams& p = in.params;
  for (const auto& [path, target, name] : {std::tuple{&sequences.seqlens_k, &p.kv_lengths, "--seqlens-k"},
                                           std::tuple{&sequences.cu_seqlens_q, &p.cu_seqlens_q, "--cu-seqlens-q"},
                                           std::tuple{&sequences.cu_seqlens_k, &p.cu_seqlens_k, "--cu-seqlens-k"}}) {
    if (path->empty()) continue;
    auto values = tools::ReadNpyInt32Vector(*path);
    if (!values.ok()) return values.status();
    if (values->empty()) return Bad(std::string(name) + " '" + *path + "' is empty");
    *target = std::move(values).value();
  }
  const bool ragged_q = !p.cu_seqlens_q.empty(), ragged_k = !p.cu_seqlens_k.empty();
  const bool bshd = sequences.layout == "bshd";

  const std::pair<const std::string*, tools::NpyArray*> files[] = {{&q_path, &in.q}, {&k_path, &in.k}, {&v_path, &in.v}};
  const char* names[] = {"Q", "K", "V"};
  for (int i = 0; i < 3; ++i) {
    auto array = tools::ReadNpy(*files[i].first);
    if (!array.ok()) return array.status();
    const bool ragged = i == 0 ? ragged_q : ragged_k;
    const size_t dims = ragged ? 3 : 4;
    if (array->shape.size() != dims) {
      return Bad(std::string(names[i]) + " '" + *files[i].first + "' has shape " + ShapeText(array->shape) +
                 "; expected " + (ragged ? "3 dimensions [total, heads, head_dim] (ragged, --cu-seqlens)"
                                         : bshd ? "4 dimensions [batch, seq_len, heads, head_dim] (--layout bshd)"
                                                : "4 dimensions [batch, heads, seq_len, head_dim]"));
    }
    for (uint64_t d : array->shape) {
      if (d > 0xffffffffull) return Bad(std::string(names[i]) + " has a dimension too large");
    }
    *files[i].second = std::move(array).value();
  }
  if (in.q.dtype != in.k.dtype || in.q.dtype != in.v.dtype) {
    return Bad(std::string("Q, K and V must have one dtype; got ") + DataTypeName(in.q.dtype) + ", " +
               DataTypeName(in.k.dtype) + ", " + DataTypeName(in.v.dtype));
  }
  if (in.k.shape != in.v.shape) {
    return Bad("K shape " + ShapeText(in.k.shape) + " differs from V shape " + ShapeText(in.v.shape));
  }
  // (batch, heads, rows, head dim) of a tensor as the options lay it out; batch 0 = ragged.
  struct Dims {
    uint64_t batch, heads, rows, head_dim;
  };
  const auto dims_of = [&](const tools::NpyArray& a, bool ragged) {
    if (ragged) return Dims{0, a.shape[1], a.shape[0], a.shape[2]};
    return bshd ? Dims{a.shape[0], a.shape[2], a.shape[1], a.shape[3]} : Dims{a.shape[0], a.shape[1], a.shape[2], a.shape[3]};
  };
  const Dims q = dims_of(in.q, ragged_q), k = dims_of(in.k, ragged_k);
  // The batch count: every source that has one must agree.
  std::vector<std::pair<uint64_t, std::string>> batches;
  if (!ragged_q) batches.push_back({q.batch, "Q " + ShapeText(in.q.shape)});
  if (!ragged_k) batches.push_back({k.batch, "K " + ShapeText(in.k.shape)});
  if (ragged_q) batches.push_back({p.cu_seqlens_q.size() - 1, "--cu-seqlens-q (" + std::to_string(p.cu_seqlens_q.size()) + " offsets)"});
  if (ragged_k) batches.push_back({p.cu_seqlens_k.size() - 1, "--cu-seqlens-k (" + std::to_string(p.cu_seqlens_k.size()) + " offsets)"});
  if (!p.kv_lengths.empty()) batches.push_back({p.kv_lengths.size(), "--seqlens-k (" + std::to_string(p.kv_lengths.size()) + " lengths)"});
  for (const auto& [batch, source] : batches) {
    if (batch != batches[0].first) {
      return Bad("batch counts differ: " + batches[0].second + " has " + std::to_string(batches[0].first) + ", " + source +
                 " has " + std::to_string(batch));
    }
  }
  if (q.head_dim != k.head_dim) {
    return Bad("head dim differs: Q " + ShapeText(in.q.shape) + " vs K " + ShapeText(in.k.shape));
  }
  if (q.heads == 0 || k.heads == 0 || q.heads % k.heads != 0) {
    return Bad("Q heads (" + std::to_string(q.heads) + ") must be a positive multiple of K/V heads (" +
               std::to_string(k.heads) + ")");
  }
  p.dtype = in.q.dtype;
  Status applied = ApplyVariantOptions(variants, &p);
  if (!applied.ok()) return applied;
  p.scale = scale;
  p.shape = {uint32_t(batches[0].first), uint32_t(q.heads), uint32_t(k.heads), uint32_t(q.rows), uint32_t(k.rows),
             uint32_t(q.head_dim)};
  // Ragged tensors are [total, H, D]: bshd with one batch entry.
  const TensorLayout q_layout = ragged_q || bshd ? TensorLayout::kBshd : TensorLayout::kBhsd;
  const TensorLayout k_layout = ragged_k || bshd ? TensorLayout::kBshd : TensorLayout::kBhsd;
  p.q_strides = p.o_strides = p.d_o_strides = PackedStrides(q_layout, p.shape.q_heads, p.shape.q_len, p.shape.head_dim);
  p.k_strides = p.v_strides = PackedStrides(k_layout, p.shape.kv_heads, p.shape.kv_len, p.shape.head_dim);
  Status loaded = LoadVariantValues(variants, &in);
  if (!loaded.ok()) return loaded;
  Status valid = ValidateAttentionParams(p);
  if (!valid.ok()) return valid;
  return in;
}

Result<std::unique_ptr<Context>> OpenContext(const std::string& device, const std::string& kernels) {
  ContextOptions options;
  options.device_selector = device;
  options.kernels = kernels;
  return Context::Create(options);
}

Result<ForwardOutputs> RunForward(Context& context, const AttentionInputs& in) {
  const AttentionShape& shape = in.params.shape;
  ForwardOutputs out;
  out.o.dtype = in.q.dtype;
  out.o.shape = in.q.shape;
  out.o.data.assign(in.q.data.size(), 0);
  out.lse.dtype = DataType::kFloat32;
  out.lse.shape = in.params.cu_seqlens_q.empty() ? std::vector<uint64_t>{shape.batch, shape.q_heads, shape.q_len}
                                                 : std::vector<uint64_t>{shape.q_heads, shape.q_len};
  out.lse.data.assign(*tools::CheckedElementCount(out.lse.shape) * sizeof(float), 0);
  if (out.o.data.empty() || shape.batch == 0) return out;  // nothing to compute: empty outputs

  auto q = UploadBuffer(context, in.q.data, in.q.data.size());
  if (!q.ok()) return q.status();
  auto k = UploadBuffer(context, in.k.data, in.k.data.size());
  if (!k.ok()) return k.status();
  auto v = UploadBuffer(context, in.v.data, in.v.data.size());
  if (!v.ok()) return v.status();
  // Outputs start as zeros: rows no sequence has (past the last offset) stay 0.
  auto o = UploadBuffer(context, out.o.data, out.o.data.size());
  if (!o.ok()) return o.status();
  auto lse = UploadBuffer(context, out.lse.data, out.lse.data.size());
  if (!lse.ok()) return lse.status();

  ForwardBuffers buffers{q->view(), k->view(), v->view(), o->view(), lse->view()};
  std::vector<Buffer> held;
  Status run = UploadVariantValues(context, in, &held, &buffers.alibi_slopes, &buffers.sinks, &buffers.mask);
  if (run.ok()) run = context.Forward(in.params, buffers);
  if (!run.ok()) return run;
  Status got = context.Download(o->view(), out.o.data.data(), out.o.data.size());
  if (got.ok()) got = context.Download(lse->view(), out.lse.data.data(), out.lse.data.size());
  if (!got.ok()) return got;
  return out;
}

Result<BackwardOutputs> RunBackward(Context& context, const AttentionInputs& in, const tools::NpyArray& d_o,
                                    bool dsinks, bool dbias) {
  const AttentionShape& shape = in.params.shape;
  dsinks = dsinks && in.params.sinks;
  dbias = dbias && in.params.mask.additive();
  BackwardOutputs out;
  out.dq = {in.q.dtype, in.q.shape, std::vector<uint8_t>(in.q.data.size(), 0)};
  out.dk = {in.k.dtype, in.k.shape, std::vector<uint8_t>(in.k.data.size(), 0)};
  out.dv = {in.v.dtype, in.v.shape, std::vector<uint8_t>(in.v.data.size(), 0)};
  if (dsinks) out.dsinks = {DataType::kFloat32, {shape.q_heads}, std::vector<uint8_t>(shape.q_heads * sizeof(float), 0)};
  if (dbias) out.dbias = {DataType::kFloat32, in.mask_shape, std::vector<uint8_t>(MaskElements(in.params) * sizeof(float), 0)};
  if ((in.q.data.empty() && in.k.data.empty()) || shape.batch == 0) return out;

  // Every tensor gets a buffer (4 bytes when empty): the operator binds stand-ins for empty sides.
  std::vector<Buffer> held;
  auto upload = [&](const std::vector<uint8_t>& data, uint64_t bytes) -> Result<BufferView> {
    auto buffer = UploadBuffer(context, data, bytes);
    if (!buffer.ok()) return buffer.status();
    held.push_back(std::move(buffer).value());
    return held.back().view();
  };
  BackwardBuffers b;
  const std::vector<uint8_t> none;
  const std::pair<BufferView*, Result<BufferView>> views[] = {
      {&b.q, upload(in.q.data, in.q.data.size())},
      {&b.k, upload(in.k.data, in.k.data.size())},
      {&b.v, upload(in.v.data, in.v.data.size())},
      {&b.d_o, upload(d_o.data, d_o.data.size())},
      {&b.o, upload(none, in.q.data.size())},
      {&b.lse, upload(none, (in.params.cu_seqlens_q.empty() ? shape.lse_elements()
                                                             : uint64_t(shape.q_heads) * shape.q_len) * sizeof(float))},
      // Gradients start as zeros: rows no sequence has stay 0.
      {&b.dq, upload(out.dq.data, in.q.data.size())},
      {&b.dk, upload(out.dk.data, in.k.data.size())},
      {&b.dv, upload(out.dv.data, in.v.data.size())},
      {&b.dsinks, dsinks ? upload(out.dsinks.data, out.dsinks.data.size()) : Result<BufferView>(BufferView{})},
      {&b.dbias, dbias ? upload(out.dbias.data, out.dbias.data.size()) : Result<BufferView>(BufferView{})},
  };
  for (const auto& [slot, view] : views) {
    if (!view.ok()) return view.status();
    *slot = *view;
  }
  Status variants = UploadVariantValues(context, in, &held, &b.alibi_slopes, &b.sinks, &b.mask);
  if (!variants.ok()) return variants;
  if (!in.q.data.empty()) {
    Status forward = context.Forward(in.params, {b.q, b.k, b.v, b.o, b.lse, {}, b.alibi_slopes, b.sinks, b.mask});
    if (!forward.ok()) return forward;
  }
  Status backward = context.Backward(in.params, b);
  if (!backward.ok()) return backward;
  Status got = context.Download(b.dq, out.dq.data.data(), out.dq.data.size());
  if (got.ok()) got = context.Download(b.dk, out.dk.data.data(), out.dk.data.size());
  if (got.ok()) got = context.Download(b.dv, out.dv.data.data(), out.dv.data.size());
  if (got.ok() && dsinks) got = context.Download(b.dsinks, out.dsinks.data.data(), out.dsinks.data.size());
  if (got.ok() && dbias && !out.dbias.data.empty()) got = context.Download(b.dbias, out.dbias.data.data(), out.dbias.data.size());
  if (!got.ok()) return got;
  return out;
}

}  // namespace vkflash::cli
