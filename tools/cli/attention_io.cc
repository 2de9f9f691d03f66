#include "attention_io.h"

#include <string>

#include "storage_bytes.h"

namespace vkflash::cli {
namespace {

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + ")";
}

Status Bad(const std::string& message) { return Status::Error(ErrorCode::kInvalidArgument, message); }

}  // namespace

Result<Buffer> UploadBuffer(Context& context, const std::vector<uint8_t>& data, uint64_t bytes) {
  auto buffer = context.CreateBuffer(bytes > 4 ? bytes : 4);
  if (!buffer.ok()) return buffer.status();
  if (!data.empty()) {
    Status uploaded = context.Upload(buffer->view(), data.data(), data.size());
    if (!uploaded.ok()) return uploaded;
  }
  return buffer;
}

std::vector<float> ToFloats(const tools::NpyArray& array) { return tools::UnpackTensor(array.data, array.dtype); }

Result<AttentionInputs> LoadAttentionInputs(const std::string& q_path, const std::string& k_path,
                                            const std::string& v_path, bool causal, std::optional<float> scale) {
  AttentionInputs in;
  const std::pair<const std::string*, tools::NpyArray*> files[] = {{&q_path, &in.q}, {&k_path, &in.k}, {&v_path, &in.v}};
  const char* names[] = {"Q", "K", "V"};
  for (int i = 0; i < 3; ++i) {
    auto array = tools::ReadNpy(*files[i].first);
    if (!array.ok()) return array.status();
    if (array->shape.size() != 4) {
      return Bad(std::string(names[i]) + " '" + *files[i].first + "' has shape " + ShapeText(array->shape) +
                 "; expected 4 dimensions [batch, heads, seq_len, head_dim]");
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
  if (in.q.shape[0] != in.k.shape[0]) {
    return Bad("batch differs: Q " + ShapeText(in.q.shape) + " vs K " + ShapeText(in.k.shape));
  }
  if (in.q.shape[3] != in.k.shape[3]) {
    return Bad("head dim differs: Q " + ShapeText(in.q.shape) + " vs K " + ShapeText(in.k.shape));
  }
  if (in.q.shape[1] == 0 || in.k.shape[1] == 0 || in.q.shape[1] % in.k.shape[1] != 0) {
    return Bad("Q heads (" + std::to_string(in.q.shape[1]) + ") must be a positive multiple of K/V heads (" +
               std::to_string(in.k.shape[1]) + ")");
  }
  AttentionParams& p = in.params;
  p.dtype = in.q.dtype;
  p.causal = causal;
  p.scale = scale;
  p.shape.batch = uint32_t(in.q.shape[0]);
  p.shape.q_heads = uint32_t(in.q.shape[1]);
  p.shape.q_len = uint32_t(in.q.shape[2]);
  p.shape.head_dim = uint32_t(in.q.shape[3]);
  p.shape.kv_heads = uint32_t(in.k.shape[1]);
  p.shape.kv_len = uint32_t(in.k.shape[2]);
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
  out.lse.shape = {shape.batch, shape.q_heads, shape.q_len};
  out.lse.data.assign(shape.lse_elements() * sizeof(float), 0);
  if (shape.q_elements() == 0) return out;  // nothing to compute: empty outputs

  auto q = UploadBuffer(context, in.q.data, in.q.data.size());
  if (!q.ok()) return q.status();
  auto k = UploadBuffer(context, in.k.data, in.k.data.size());
  if (!k.ok()) return k.status();
  auto v = UploadBuffer(context, in.v.data, in.v.data.size());
  if (!v.ok()) return v.status();
  auto o = context.CreateBuffer(out.o.data.size());
  if (!o.ok()) return o.status();
  auto lse = context.CreateBuffer(out.lse.data.size());
  if (!lse.ok()) return lse.status();

  ForwardBuffers buffers{q->view(), k->view(), v->view(), o->view(), lse->view()};
  Status run = context.Forward(in.params, buffers);
  if (!run.ok()) return run;
  Status got = context.Download(o->view(), out.o.data.data(), out.o.data.size());
  if (got.ok()) got = context.Download(lse->view(), out.lse.data.data(), out.lse.data.size());
  if (!got.ok()) return got;
  return out;
}

Result<BackwardOutputs> RunBackward(Context& context, const AttentionInputs& in, const tools::NpyArray& d_o) {
  const AttentionShape& shape = in.params.shape;
  BackwardOutputs out;
  out.dq = {in.q.dtype, in.q.shape, std::vector<uint8_t>(in.q.data.size(), 0)};
  out.dk = {in.k.dtype, in.k.shape, std::vector<uint8_t>(in.k.data.size(), 0)};
  out.dv = {in.v.dtype, in.v.shape, std::vector<uint8_t>(in.v.data.size(), 0)};
  if (shape.q_elements() == 0 && shape.kv_elements() == 0) return out;

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
      {&b.lse, upload(none, shape.lse_elements() * sizeof(float))},
      {&b.dq, upload(none, in.q.data.size())},
      {&b.dk, upload(none, in.k.data.size())},
      {&b.dv, upload(none, in.v.data.size())},
  };
  for (const auto& [slot, view] : views) {
    if (!view.ok()) return view.status();
    *slot = *view;
  }
  if (shape.q_elements() > 0) {
    Status forward = context.Forward(in.params, {b.q, b.k, b.v, b.o, b.lse});
    if (!forward.ok()) return forward;
  }
  Status backward = context.Backward(in.params, b);
  if (!backward.ok()) return backward;
  Status got = context.Download(b.dq, out.dq.data.data(), out.dq.data.size());
  if (got.ok()) got = context.Download(b.dk, out.dk.data.data(), out.dk.data.size());
  if (got.ok()) got = context.Download(b.dv, out.dv.data.data(), out.dv.data.size());
  if (!got.ok()) return got;
  return out;
}

}  // namespace vkflash::cli
