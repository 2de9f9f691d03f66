// vkflash-train: trains a small multi-head attention layer with vkflash's forward and backward
// passes, to show the pieces fit together.
//
// The layer: Q = X Wq, K = X Wk, V = X Wv (per head), O = attention(Q, K, V). A "teacher" layer
// with hidden random weights makes the targets Y from the same inputs X; the "student" starts from
// other random weights and learns Wq, Wk, Wv by Adam on loss = mean((O - Y)^2) / 2. Attention
// (forward and backward) runs on the Vulkan device; the small projections run on the CPU.
#include <CLI/CLI.hpp>
#include <vkflash/device_info.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "storage_bytes.h"

namespace {

using vkflash::AttentionParams;
using vkflash::Buffer;
using vkflash::Context;
using vkflash::DataType;
using Matrix = std::vector<float>;  // row-major

struct Options {
  uint32_t steps = 300, seq_len = 64, model_dim = 32, heads = 4, head_dim = 16, seed = 7;
  float learning_rate = 0.02f;
  bool causal = false, validation = false;
  std::string dtype = "f32", device;
  double require_ratio = 0.0;  // > 0: exit 1 unless final loss <= ratio * initial loss
};

Matrix RandomMatrix(size_t rows, size_t cols, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  Matrix m(rows * cols);
  for (float& x : m) x = normal(rng);
  return m;
}

// [N, C] x [C, H*D] -> [H, N, D] (the attention layout for batch 1).
Matrix Project(const Matrix& x, const Matrix& w, const Options& o) {
  const uint32_t N = o.seq_len, C = o.model_dim, H = o.heads, D = o.head_dim;
  Matrix out(size_t(H) * N * D, 0.0f);
  for (uint32_t n = 0; n < N; ++n)
    for (uint32_t c = 0; c < C; ++c)
      for (uint32_t j = 0; j < H * D; ++j) out[(size_t(j / D) * N + n) * D + j % D] += x[n * C + c] * w[c * H * D + j];
  return out;
}

// dW = X^T dP, where dP is [H, N, D] laid out as the projection's output.
Matrix ProjectionGradient(const Matrix& x, const Matrix& d_projected, const Options& o) {
  const uint32_t N = o.seq_len, C = o.model_dim, H = o.heads, D = o.head_dim;
  Matrix grad(size_t(C) * H * D, 0.0f);
  for (uint32_t n = 0; n < N; ++n)
    for (uint32_t c = 0; c < C; ++c)
      for (uint32_t j = 0; j < H * D; ++j) grad[c * H * D + j] += x[n * C + c] * d_projected[(size_t(j / D) * N + n) * D + j % D];
  return grad;
}

// Adam, one parameter tensor.
struct Adam {
  Matrix m, v;
  void Step(Matrix& w, const Matrix& g, float lr, uint32_t t) {
    if (m.empty()) m.assign(w.size(), 0.0f), v.assign(w.size(), 0.0f);
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const float c1 = 1.0f - std::pow(b1, float(t)), c2 = 1.0f - std::pow(b2, float(t));
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
  }
};

// Device tensors of the layer, in the storage dtype.
class DeviceAttention {
 public:
  DeviceAttention(Context& context, const AttentionParams& params) : context_(context), params_(params) {}

  bool Init() {
    const size_t bytes = params_.shape.q_elements() * vkflash::DataTypeSize(params_.dtype);
    for (Buffer* b : {&q_, &k_, &v_, &o_, &d_o_, &dq_, &dk_, &dv_}) {
      auto made = context_.CreateBuffer(bytes);
      if (!made.ok()) return Report(made.status());
      *b = std::move(made).value();
    }
    auto lse = context_.CreateBuffer(params_.shape.lse_elements() * sizeof(float));
    if (!lse.ok()) return Report(lse.status());
    lse_ = std::move(lse).value();
    return true;
  }

  // O = attention(q, k, v).
  bool Forward(const Matrix& q, const Matrix& k, const Matrix& v, Matrix* o) {
    return Upload(q_, q) && Upload(k_, k) && Upload(v_, v) &&
           Check(context_.Forward(params_, {q_.view(), k_.view(), v_.view(), o_.view(), lse_.view()})) &&
           Download(o_, o);
  }

  // Gradients for the last Forward's inputs, given dO.
  bool Backward(const Matrix& d_o, Matrix* dq, Matrix* dk, Matrix* dv) {
    vkflash::BackwardBuffers b;
    b.q = q_.view(), b.k = k_.view(), b.v = v_.view(), b.o = o_.view(), b.lse = lse_.view(), b.d_o = d_o_.view();
    b.dq = dq_.view(), b.dk = dk_.view(), b.dv = dv_.view();
    return Upload(d_o_, d_o) && Check(context_.Backward(params_, b)) && Download(dq_, dq) && Download(dk_, dk) &&
           Download(dv_, dv);
  }

 private:
  bool Report(const vkflash::Status& s) {
    std::fprintf(stderr, "vkflash-train: %s\n", s.ToString().c_str());
    return false;
  }
  bool Check(const vkflash::Status& s) { return s.ok() || Report(s); }
  bool Upload(const Buffer& dst, const Matrix& values) {
    const std::vector<uint8_t> bytes = vkflash::tools::PackTensor(values, params_.dtype);
    return Check(context_.Upload(dst.view(), bytes.data(), bytes.size()));
  }
  bool Download(const Buffer& src, Matrix* values) {
    std::vector<uint8_t> bytes(params_.shape.q_elements() * vkflash::DataTypeSize(params_.dtype));
    if (!Check(context_.Download(src.view(), bytes.data(), bytes.size()))) return false;
    *values = vkflash::tools::UnpackTensor(bytes, params_.dtype);
    return true;
  }

  Context& context_;
  AttentionParams params_;
  Buffer q_, k_, v_, o_, lse_, d_o_, dq_, dk_, dv_;
};

int Train(const Options& o) {
  vkflash::ContextOptions context_options;
  context_options.device_selector = o.device;
  context_options.enable_validation = o.validation;
  int validation_messages = 0;
  context_options.message_callback = [&](vkflash::MessageSeverity, const std::string& message) {
    ++validation_messages;
    std::fprintf(stderr, "vkflash-train: validation: %s\n", message.c_str());
  };
  auto context = Context::Create(context_options);
  if (!context.ok()) {
    std::fprintf(stderr, "vkflash-train: %s\n", context.status().ToString().c_str());
    return 2;
  }

  AttentionParams params;
  params.shape = {1, o.heads, o.heads, o.seq_len, o.seq_len, o.head_dim};
  params.dtype = o.dtype == "f16" ? DataType::kFloat16 : DataType::kFloat32;
  params.causal = o.causal;
  std::printf("device: %s\nlayer: seq %u, model dim %u, %u heads of dim %u, %s%s\n",
              (*context)->device_info().name.c_str(), o.seq_len, o.model_dim, o.heads, o.head_dim,
              vkflash::DataTypeName(params.dtype), o.causal ? ", causal" : "");

  std::mt19937 rng(o.seed);
  const float init = 1.0f / std::sqrt(float(o.model_dim));
  const Matrix x = RandomMatrix(o.seq_len, o.model_dim, 1.0f, rng);
  const Matrix teacher_q = RandomMatrix(o.model_dim, o.heads * o.head_dim, 2 * init, rng);
  const Matrix teacher_k = RandomMatrix(o.model_dim, o.heads * o.head_dim, 2 * init, rng);
  const Matrix teacher_v = RandomMatrix(o.model_dim, o.heads * o.head_dim, init, rng);
  Matrix wq = RandomMatrix(o.model_dim, o.heads * o.head_dim, init, rng);
  Matrix wk = RandomMatrix(o.model_dim, o.heads * o.head_dim, init, rng);
  Matrix wv = RandomMatrix(o.model_dim, o.heads * o.head_dim, init, rng);

  DeviceAttention attention(**context, params);
  if (!attention.Init()) return 1;
  Matrix target;
  if (!attention.Forward(Project(x, teacher_q, o), Project(x, teacher_k, o), Project(x, teacher_v, o), &target)) return 1;

  Adam adam_q, adam_k, adam_v;
  double first_loss = 0.0, loss = 0.0;
  for (uint32_t step = 1; step <= o.steps; ++step) {
    Matrix out, dq, dk, dv;
    if (!attention.Forward(Project(x, wq, o), Project(x, wk, o), Project(x, wv, o), &out)) return 1;
    Matrix d_out(out.size());
    loss = 0.0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double diff = double(out[i]) - target[i];
      loss += 0.5 * diff * diff / double(out.size());
      d_out[i] = float(diff / double(out.size()));
    }
    if (step == 1) first_loss = loss;
    if (step == 1 || step % 25 == 0 || step == o.steps) std::printf("step %4u  loss %.6f\n", step, loss);
    if (!attention.Backward(d_out, &dq, &dk, &dv)) return 1;
    adam_q.Step(wq, ProjectionGradient(x, dq, o), o.learning_rate, step);
    adam_k.Step(wk, ProjectionGradient(x, dk, o), o.learning_rate, step);
    adam_v.Step(wv, ProjectionGradient(x, dv, o), o.learning_rate, step);
  }
  const double ratio = loss / first_loss;
  std::printf("loss fell from %.6f to %.6f (%.1f%% of the start)\n", first_loss, loss, 100.0 * ratio);
  if (validation_messages > 0) {
    std::fprintf(stderr, "vkflash-train: the validation layer reported %d message(s)\n", validation_messages);
    return 1;
  }
  if (!std::isfinite(loss) || (o.require_ratio > 0.0 && ratio > o.require_ratio)) {
    std::fprintf(stderr, "vkflash-train: the loss did not fall to %.0f%% of the start\n", 100.0 * o.require_ratio);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"vkflash-train: train a small attention layer with vkflash's forward and backward passes"};
  app.add_option("--steps", o.steps, "Training steps")->capture_default_str();
  app.add_option("--seq", o.seq_len, "Sequence length")->capture_default_str();
  app.add_option("--model-dim", o.model_dim, "Model (input) dimension")->capture_default_str();
  app.add_option("--heads", o.heads, "Attention heads")->capture_default_str();
  app.add_option("--head-dim", o.head_dim, "Head dimension")->capture_default_str();
  app.add_option("--lr", o.learning_rate, "Adam learning rate")->capture_default_str();
  app.add_option("--seed", o.seed, "Random seed")->capture_default_str();
  app.add_option("--dtype", o.dtype, "f32 or f16")->check(CLI::IsMember({"f32", "f16"}))->capture_default_str();
  app.add_flag("--causal", o.causal, "Causal attention");
  app.add_option("--device", o.device, "Device index or name substring");
  app.add_flag("--validation", o.validation, "Run with the Vulkan validation layer; any message fails the run");
  app.add_option("--require-ratio", o.require_ratio, "Exit 1 unless final loss <= ratio * first loss");
  CLI11_PARSE(app, argc, argv);
  return Train(o);
}
