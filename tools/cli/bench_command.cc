// `vkflash bench`: GPU time of the forward and backward passes from timestamp queries (warm-up,
// then the median of many runs), in TFLOP/s counted as FlashAttention's benchmarks count them:
// forward 4 * D per (query row, key) pair the call computes (VisiblePairs: B * H * N * N without a
// mask, about half of it causal, N * window with a sliding window; with --mask-sparsity only the
// blocks it leaves open), backward 2.5x the forward. Beside the
// FlashAttention kernels it times the naive three-pass baseline (S, softmax, PV through an N x N
// buffer) wherever that buffer fits the device, so the ratio shows on any GPU.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <vkflash/diagnostics.hpp>

#include "attention_io.h"
#include "cli_error.h"
#include "commands.h"
#include "output_files.h"
#include "reference_attention.h"

namespace vkflash::cli {
namespace {

struct BenchOptions {
  uint32_t batch = 4, heads = 16, kv_heads = 0, seq_len = 4096, head_dim = 128;
  uint32_t q_len = 0, kv_len = 0;  // 0: seq_len
  std::string dtype = "f16", mode = "both", json, device, preset, kernels;
  VariantOptions variants;
  bool naive = true, nondeterministic = false;
  bool read_ceiling = false;  // also time reading K and V once (the decode preset: always)
  uint32_t warmup = 3, runs = 20;
  double warmup_ms = 300;  // and keep warming up until this much GPU time has passed (clocks ramp up)
  double min_time_ms = 200;  // timed runs continue (in batches of `runs`) until this much GPU time
};

struct BenchConfig {
  AttentionParams params;
  bool forward = true, backward = true;
};

// A kernel and its tile as the table prints them: "name ROWSxKEYS/INVOCATIONS" (query rows x keys
// per tile, also for the dK/dV kernels, which own the keys; a kernel without key tiles, ROWS), and
// the invocations per row where the kernel has several ("name 32x32/8/128": the register-tiled
// backward's tiles can differ only there).
std::string KernelText(const KernelChoice& k) {
  std::string text = k.kernel + " " + std::to_string(k.block_q);
  if (k.block_kv > 0) text += "x" + std::to_string(k.block_kv);
  text += "/";
  if (k.threads_per_row > 1) text += std::to_string(k.threads_per_row) + "/";
  return text + std::to_string(k.workgroup_size);
}

// The forward's FLOPs: 4 * D per visible pair; with --mask-sparsity, only the pairs of the blocks
// left open (the kernels skip the closed ones, as FlexAttention's benchmarks count block-sparse
// attention).
double ForwardFlops(const AttentionParams& p, const ClosedBiasBlocks* closed = nullptr) {
  if (closed == nullptr) return 4.0 * p.shape.head_dim * double(VisiblePairs(p));
  // Per row, its band's keys in each open block: O(Nq * blocks), not a test per pair.
  constexpr uint64_t kBlock = ClosedBiasBlocks::kSize;
  uint64_t pairs = 0;
  for (uint32_t i = 0; i < p.shape.q_len; ++i) {
    const tools::VisibleKeyRange keys = tools::VisibleKeys(p, i);
    for (uint64_t first = keys.first; first < keys.end; first = (first / kBlock + 1) * kBlock) {
      if (!closed->Closes(i, uint32_t(first))) pairs += std::min(keys.end, (first / kBlock + 1) * kBlock) - first;
    }
  }
  return 4.0 * p.shape.head_dim * double(pairs) * p.shape.batch * p.shape.q_heads;
}

// The table's mask column: no, causal, or the window as wL,R (with causal: the right side 0).
std::string MaskName(const AttentionParams& p) {
  if (p.window.left == -1 && p.window.right == -1) return p.causal ? "causal" : "no";
  return "w" + std::to_string(p.window.left) + "," + std::to_string(p.causal ? 0 : p.window.right);
}

// The table's score column: the score variants joined by '+', or "-".
std::string ScoreName(const AttentionParams& p, float mask_sparsity) {
  std::string text = ScoreVariantsText(p, '+');
  if (mask_sparsity > 0.0f) text += "/closed=" + FloatText(mask_sparsity);  // of the bias's blocks
  return text.empty() ? "-" : text;
}

// `variants`: the window and score variants of every config (the fa preset sets causal itself).
std::vector<BenchConfig> Configs(const BenchOptions& o, const AttentionParams& variants) {
  std::vector<BenchConfig> configs;
  const DataType dtype = o.dtype == "f32" ? DataType::kFloat32 : DataType::kFloat16;
  auto add = [&](uint32_t b, uint32_t h, uint32_t hkv, uint32_t nq, uint32_t nk, uint32_t d, bool causal) {
    BenchConfig c;
    c.params.shape = {b, h, hkv, nq, nk, d};
    c.params.dtype = dtype;
    c.params.causal = causal;
    c.params.window = variants.window;
    c.params.softcap = variants.softcap;
    c.params.alibi = variants.alibi;
    c.params.sinks = variants.sinks;
    c.params.mask = variants.mask;
    c.params.deterministic = !o.nondeterministic;
    c.forward = o.mode != "bwd";
    c.backward = o.mode != "fwd";
    configs.push_back(c);
  };
  if (o.preset == "fa") {  // FlashAttention's grid: 16k tokens per batch, H * D = 2048
    for (bool causal : {false, true})
      for (uint32_t d : {64u, 128u})
        for (uint32_t n : {512u, 1024u, 2048u, 4096u, 8192u, 16384u}) add(16384 / n, 2048 / d, 2048 / d, n, n, d, causal);
  } else if (o.preset == "decode") {  // generating over a KV cache: 32 query heads, GQA and MHA
    for (uint32_t d : {64u, 128u})
      for (uint32_t hkv : {8u, 32u})
        for (uint32_t b : {1u, 4u, 16u})
          for (uint32_t nq : {1u, 4u, 16u})
            for (uint32_t nk : {1024u, 16384u, 131072u}) {
              add(b, 32, hkv, nq, nk, d, variants.causal);
              configs.back().backward = false;  // decode is a forward workload
            }
  } else {
    add(o.batch, o.heads, o.kv_heads ? o.kv_heads : o.heads, o.q_len ? o.q_len : o.seq_len,
        o.kv_len ? o.kv_len : o.seq_len, o.head_dim, variants.causal);
  }
  return configs;
}

// Normal values; past 2^20 elements the first 2^20 repeat (the time does not depend on them, and a
// decode grid's caches reach gigabytes).
std::vector<uint8_t> RandomBytes(uint64_t elements, DataType dtype, std::mt19937& rng) {
  constexpr uint64_t kBlock = uint64_t(1) << 20;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(std::min(elements, kBlock));
  for (float& x : values) x = normal(rng);
  const std::vector<uint8_t> block = tools::MakeNpy(dtype, {values.size()}, values).data;
  std::vector<uint8_t> bytes(elements * DataTypeSize(dtype));
  for (uint64_t at = 0; at < bytes.size(); at += block.size()) {
    std::copy_n(block.begin(), std::min<uint64_t>(block.size(), bytes.size() - at), bytes.begin() + at);
  }
  return bytes;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timing {
  std::string mode, kernel;
  double ms = 0, tflops = 0;
  double kv_gbps = 0;  // K and V bytes over the time: what bounds decode
  uint32_t runs = 0;   // timed runs behind the median
  double read_gbps = 0;  // the read probe over the same K and V bytes (0: not measured)
};

struct Measured {
  double median_ms = 0;
  uint32_t runs = 0;
};

// Times one config; appends a Timing per mode.
Status RunConfig(Context& context, const BenchConfig& c, const BenchOptions& o, std::vector<Timing>* out) {
  const AttentionParams& p = c.params;
  const AttentionShape& s = p.shape;
  const uint64_t e = DataTypeSize(p.dtype);
  std::mt19937 rng(1);
  std::vector<Buffer> held;
  auto make = [&](uint64_t elements, bool random) -> Result<BufferView> {
    auto b = UploadBuffer(context, random ? RandomBytes(elements, p.dtype, rng) : std::vector<uint8_t>(), elements * e);
    if (!b.ok()) return b.status();
    held.push_back(std::move(b).value());
    return held.back().view();
  };
  BackwardBuffers b;
  for (auto [slot, elements, random] : {std::tuple{&b.q, s.q_elements(), true}, {&b.k, s.kv_elements(), true},
                                        {&b.v, s.kv_elements(), true}, {&b.d_o, s.q_elements(), true},
                                        {&b.o, s.q_elements(), false}, {&b.dq, s.q_elements(), false},
                                        {&b.dk, s.kv_elements(), false}, {&b.dv, s.kv_elements(), false}}) {
    const bool gradient_only = slot == &b.d_o || slot == &b.dq || slot == &b.dk || slot == &b.dv;
    if (gradient_only && !c.backward) continue;  // a forward-only config (decode) allocates no gradients
    auto view = make(elements, random);
    if (!view.ok()) return view.status();
    *slot = *view;
  }
  auto make_bytes = [&](uint64_t bytes) -> Result<BufferView> {
    auto buffer = context.CreateBuffer(std::max<uint64_t>(bytes, 4));
    if (!buffer.ok()) return buffer.status();
    held.push_back(std::move(buffer).value());
    return held.back().view();
  };
  auto forward_workspace = context.ForwardWorkspaceBytes(p);
  if (!forward_workspace.ok()) return forward_workspace.status();
  Result<uint64_t> backward_workspace = uint64_t(0);
  if (c.backward) backward_workspace = context.BackwardWorkspaceBytes(p);
  if (!backward_workspace.ok()) return backward_workspace.status();
  ForwardBuffers f{b.q, b.k, b.v, b.o};
  for (auto [view, bytes] : {std::pair{&b.lse, s.lse_elements() * 4}, {&b.workspace, *backward_workspace},
                             {&f.workspace, *forward_workspace}}) {
    if (view == &f.workspace && bytes == 0) continue;  // the usual case: the forward needs none
    auto made = make_bytes(bytes);
    if (!made.ok()) return made.status();
    *view = *made;
  }
  f.lse = b.lse;
  // The score variants' values: ALiBi's geometric slopes, Normal(0, 1) sinks; dSinks with the gradients.
  for (auto [view, values, used] : {std::tuple{&b.alibi_slopes, GeometricAlibiSlopes(s.q_heads), p.alibi != AlibiSlopes::kNone},
                                    {&b.sinks, RandomSinks(s.q_heads, 1), p.sinks},
                                    {&b.dsinks, std::vector<float>(s.q_heads), p.sinks && c.backward}}) {
    if (!used) continue;
    auto made = UploadFloats(context, values, &held);
    if (!made.ok()) return made.status();
    *view = *made;
  }
  f.alibi_slopes = b.alibi_slopes;
  f.sinks = b.sinks;
  std::optional<ClosedBiasBlocks> closed_blocks;  // --mask-sparsity's
  if (p.mask.type != MaskType::kNone) {
    // --mask: a bias [1, 1, Nq, Nk] of RandomBias's values, its first 2^20 repeating past that,
    // stored as --mask-dtype says; --mask-sparsity closes that fraction of its 128 x 128 blocks.
    const std::vector<float> block = RandomBias(1, uint32_t(std::min<uint64_t>(MaskElements(p), 1u << 20)), 1);
    std::vector<float> bias(MaskElements(p));
    for (uint64_t at = 0; at < bias.size(); at += block.size()) {
      std::copy_n(block.begin(), std::min<uint64_t>(block.size(), bias.size() - at), bias.begin() + at);
    }
    if (o.variants.mask_sparsity > 0.0f) {
      closed_blocks = ChooseClosedBiasBlocks(s.q_len, s.kv_len, o.variants.mask_sparsity, 2);
      CloseBiasBlocks(*closed_blocks, bias.data());
    }
    auto made = UploadBuffer(context, MaskStorage(bias, p.mask.type), MaskBytes(p));
    if (!made.ok()) return made.status();
    held.push_back(std::move(made).value());
    f.mask = b.mask = held.back().view();
  }
  if (Status st = context.Forward(p, f); !st.ok()) return st;  // O and LSE for the backward; pipeline made

  // Warm-up in growing back-to-back batches (the GPU stays busy, so its clocks ramp up), then
  // batches of `runs` timed runs until there are min_time_ms of them: one short batch alone let a
  // slow phase of the GPU (seen on the H100: 1 median in ~7 at 0.4x) decide the median.
  auto time = [&](const std::function<Status(VkCommandBuffer)>& record, uint32_t runs) -> Result<Measured> {
    constexpr uint32_t kMaxBatches = 100;  // both loops end even where a run reads as 0 ms
    double warm_ms = 0;
    uint32_t done = 0, batch = 1;
    for (uint32_t i = 0; i < kMaxBatches && (done < o.warmup || warm_ms < o.warmup_ms); ++i) {
      auto warm = MeasureGpuTime(context, record, batch);
      if (!warm.ok()) return warm.status();
      for (double t : *warm) warm_ms += t;
      done += batch;
      batch = std::min(2 * batch, 64u);
    }
    std::vector<double> all;
    double timed_ms = 0;
    for (uint32_t i = 0; i < kMaxBatches && (all.empty() || timed_ms < o.min_time_ms); ++i) {
      auto times = MeasureGpuTime(context, record, runs);
      if (!times.ok()) return times.status();
      for (double t : *times) timed_ms += t;
      all.insert(all.end(), times->begin(), times->end());
    }
    return Measured{Median(all), uint32_t(all.size())};
  };
  const double kv_bytes = 2.0 * s.kv_elements() * e;
  auto add_row = [&](const char* mode, std::string kernel, const Measured& measured, double flops) {
    const double seconds = measured.median_ms * 1e-3;
    out->push_back({mode, std::move(kernel), measured.median_ms, flops / seconds / 1e12, kv_bytes / seconds / 1e9,
                    measured.runs});
  };
  const double forward_flops = ForwardFlops(p, closed_blocks ? &*closed_blocks : nullptr);
  if (c.forward) {
    auto measured = time([&](VkCommandBuffer cmd) { return context.RecordForward(cmd, p, f); }, o.runs);
    if (!measured.ok()) return measured.status();
    auto choice = context.ChooseForwardKernel(p);
    add_row("fwd", KernelText(*choice), *measured, forward_flops);
    if (o.read_ceiling || o.preset == "decode") {
      // The same K and V bytes read once by the read probe: the ceiling of this forward.
      const std::array<BufferView, 2> sources = {BufferView{b.k.buffer, b.k.offset, b.k.size / 16 * 16},
                                                 BufferView{b.v.buffer, b.v.offset, b.v.size / 16 * 16}};
      auto sink = make_bytes(ReadStreamSinkBytes(context, sources));
      if (!sink.ok()) return sink.status();
      auto read = time([&](VkCommandBuffer cmd) { return RecordReadStream(context, cmd, sources, *sink); }, o.runs);
      if (!read.ok()) return read.status();
      out->back().read_gbps = 2.0 * sources[0].size / (read->median_ms * 1e-3) / 1e9;
    }
  }
  // The naive baseline computes plain attention only: no row beside a score variant.
  const bool plain_scores = p.softcap == 0.0f && p.alibi == AlibiSlopes::kNone && !p.sinks && p.mask.type == MaskType::kNone;
  if (o.naive && plain_scores && c.forward && NaiveScoresBytes(s) <= context.device_info().max_storage_buffer_range) {
    auto scores = context.CreateBuffer(NaiveScoresBytes(s));
    if (scores.ok()) {  // where memory allows
      // At most 5 runs: at N = 16384 one naive run takes seconds.
      auto measured = time(
          [&](VkCommandBuffer cmd) { return RecordNaiveForward(context, cmd, p, f, scores->view()); }, std::min(o.runs, 5u));
      // Unsupported here (a driver's loop budget shorter than its rows): no naive row.
      if (!measured.ok() && measured.status().code() != ErrorCode::kUnsupported) return measured.status();
      if (measured.ok()) add_row("fwd", "naive (S, softmax, PV)", *measured, ForwardFlops(p));
    }
  }
  if (c.backward) {
    auto measured = time([&](VkCommandBuffer cmd) { return context.RecordBackward(cmd, p, b); }, o.runs);
    if (!measured.ok()) return measured.status();
    auto kernels = context.ChooseBackwardKernels(p);
    add_row("bwd", KernelText(kernels->dkdv) + " + " + KernelText(kernels->dq), *measured, 2.5 * forward_flops);
  }
  return Status::Ok();
}

int RunBench(const BenchOptions& o) {
  // The JSON's destination is checked before minutes of timing, and written only when all rows are.
  OutputFiles files;
  if (!o.json.empty()) {
    if (Status planned = files.Plan("--json", o.json); !planned.ok()) return ReportError(planned);
  }
  AttentionParams variants;
  if (Status applied = ApplyVariantOptions(o.variants, &variants); !applied.ok()) return ReportError(applied);
  if (o.variants.made_alibi) variants.alibi = AlibiSlopes::kPerHead;
  variants.sinks = o.variants.made_sinks;
  if (o.variants.made_mask) variants.mask = {MadeMaskType(o.variants), false, false, true, true};
  const auto configs = Configs(o, variants);
  for (const BenchConfig& config : configs) {
    if (Status valid = ValidateAttentionParams(config.params); !valid.ok()) return ReportError(valid);
  }
  auto context = OpenContext(o.device, o.kernels);
  if (!context.ok()) return ReportError(context.status());
  nlohmann::json rows = nlohmann::json::array();
  const std::string device = (*context)->device_info().name;
  std::printf("device: %s\n%5s %4s %4s %6s %6s %4s %5s %9s %-12s %4s %-36s %10s %8s %9s %9s %6s\n", device.c_str(), "B",
              "H", "Hkv", "Nq", "Nk", "D", "dtype", "mask", "score", "mode", "kernel", "ms", "TFLOP/s", "KV GB/s",
              "read GB/s", "ratio");
  for (size_t i = 0; i < configs.size(); ++i) {
    const AttentionParams& p = configs[i].params;
    std::fprintf(stderr, "\r[%zu/%zu] B=%u H=%u Nq=%u Nk=%u D=%u%s ...", i + 1, configs.size(), p.shape.batch,
                 p.shape.q_heads, p.shape.q_len, p.shape.kv_len, p.shape.head_dim,
                 (" " + MaskName(p) + " " + ScoreName(p, o.variants.mask_sparsity)).c_str());
    std::fflush(stderr);
    std::vector<Timing> timings;
    // A grid's shapes past what one binding can reach are skipped (the library refuses them too).
    const uint64_t largest_tensor = std::max(p.shape.q_elements(), p.shape.kv_elements()) * DataTypeSize(p.dtype);
    if (!o.preset.empty() && largest_tensor > (*context)->device_info().max_storage_buffer_range) {
      std::fprintf(stderr, "\r%60s\r", "");
      std::printf("%5u %4u %4u %6u %6u %4u skipped: a %.1f GB tensor, past maxStorageBufferRange\n", p.shape.batch,
                  p.shape.q_heads, p.shape.kv_heads, p.shape.q_len, p.shape.kv_len, p.shape.head_dim,
                  largest_tensor / 1e9);
      continue;
    }
    Status status = RunConfig(**context, configs[i], o, &timings);
    std::fprintf(stderr, "\r%60s\r", "");
    if (!status.ok()) return ReportError(status);
    for (const Timing& t : timings) {
      char ceiling[32] = "        -      -";
      if (t.read_gbps > 0) std::snprintf(ceiling, sizeof(ceiling), "%9.1f %6.2f", t.read_gbps, t.kv_gbps / t.read_gbps);
      std::printf("%5u %4u %4u %6u %6u %4u %5s %9s %-12s %4s %-36s %10.3f %8.2f %9.1f %s\n", p.shape.batch,
                  p.shape.q_heads, p.shape.kv_heads, p.shape.q_len, p.shape.kv_len, p.shape.head_dim,
                  p.dtype == DataType::kFloat16 ? "f16" : "f32", MaskName(p).c_str(), ScoreName(p, o.variants.mask_sparsity).c_str(),
                  t.mode.c_str(), t.kernel.c_str(), t.ms, t.tflops, t.kv_gbps, ceiling);
      std::fflush(stdout);
      rows.push_back({{"device", device}, {"B", p.shape.batch}, {"H", p.shape.q_heads}, {"Hkv", p.shape.kv_heads},
                      {"N", p.shape.q_len}, {"Nq", p.shape.q_len}, {"Nk", p.shape.kv_len}, {"D", p.shape.head_dim}, {"dtype", p.dtype == DataType::kFloat16 ? "f16" : "f32"},
                      {"causal", p.causal}, {"window", {p.window.left, p.window.right}}, {"softcap", p.softcap},
                      {"alibi", p.alibi != AlibiSlopes::kNone}, {"sinks", p.sinks}, {"bias", p.mask.type != MaskType::kNone}, {"mask_dtype", MaskDtypeName(p.mask.type)}, {"mask_sparsity", o.variants.mask_sparsity}, {"mode", t.mode}, {"kernel", t.kernel}, {"ms", t.ms},
                      {"tflops", t.tflops}, {"kv_gbps", t.kv_gbps}, {"runs", t.runs}});
      if (t.read_gbps > 0) rows.back()["read_gbps"] = t.read_gbps;
    }
  }
  if (!o.json.empty()) {
    Status written = files.StageText(o.json, rows.dump(1) + "\n");
    if (written.ok()) written = files.Commit();
    if (!written.ok()) return ReportError(written);
  }
  return kExitOk;
}

}  // namespace

Command AddBenchCommand(CLI::App& parent) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = parent.add_subcommand("bench", "GPU time of forward/backward (timestamp queries, median of runs)");
  app->add_option("--b", o->batch, "Batch")->capture_default_str();
  app->add_option("--h", o->heads, "Query heads")->capture_default_str();
  app->add_option("--hkv", o->kv_heads, "Key/value heads (default: --h)");
  app->add_option("--n", o->seq_len, "Sequence length (queries and keys)")->capture_default_str();
  app->add_option("--nq", o->q_len, "Query length (default: --n)");
  app->add_option("--nk", o->kv_len, "Key/value length (default: --n)");
  app->add_option("--d", o->head_dim, "Head dim")->capture_default_str();
  app->add_option("--dtype", o->dtype, "f32 or f16")->check(CLI::IsMember({"f32", "f16"}))->capture_default_str();
  AddVariantOptions(app, &o->variants, VariantValues::kMade);
  app->add_flag("--nondeterministic", o->nondeterministic,
                "Backward: allow atomic dQ or stored dS (as `backward`)");
  app->add_option("--mode", o->mode, "fwd, bwd or both")->check(CLI::IsMember({"fwd", "bwd", "both"}))->capture_default_str();
  app->add_option("--preset", o->preset,
                  "fa: FlashAttention's benchmark grid; decode: B 1-16, 32 query heads over 8 or 32 KV heads, "
                  "Nq 1/4/16, Nk 1k-128k, D 64 and 128")
      ->check(CLI::IsMember({"fa", "decode"}));
  app->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str();
  app->add_option("--warmup-ms", o->warmup_ms, "...and untimed runs until this much GPU time has passed")
      ->capture_default_str();
  app->add_option("--runs", o->runs, "Timed runs per batch (the median of all is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 10000u));
  app->add_option("--min-time-ms", o->min_time_ms, "Timed batches continue until this much GPU time has passed")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60000.0));
  app->add_option("--json", o->json, "Write the rows as JSON to this file");
  app->add_option("--device", o->device, "Device index or name substring");
  app->add_option("--kernel", o->kernels, "Kernel family (default: VKFLASH_KERNELS, else auto)")
      ->check(CLI::IsMember(KernelsOptionValues()));
  app->add_flag("--read-ceiling", o->read_ceiling,
                "Also time reading K and V once with a streaming kernel, and print the forward's ratio to it "
                "(on with --preset decode)");
  app->add_flag("--naive,!--no-naive", o->naive, "Also time the naive three-pass baseline where it fits (default: on)");
  return {app, [o]() { return RunBench(*o); }};
}

}  // namespace vkflash::cli
