// Random combinations of everything a call can ask for, forward and backward, against the float64
// reference: shapes with tails and Nq != Nk, GQA and MQA group sizes, decode-like rows over long
// KV, both dtypes, a scale of its own, causal or a window, softcap, ALiBi, sinks, a mask or bias of
// any element type and broadcast (about a fifth of its pairs and some of its 16 x 16 blocks
// blocked), the bias's gradient, deterministic = false, tensors in [B, N, H, D] or at padded
// strides of their own, sequences that differ (a KV cache's lengths, ragged queries and keys:
// support/sequence_case.h checks those, and the strided ones, sequence by sequence), mobile
// limits and a small loop budget. The other files' fixed sweeps cover each variant on chosen shapes; this case draws
// the combinations they do not name, where tile edges, closed tiles and kernel choices meet.
//
// CI runs the default draw (a fixed seed, a few dozen cases on lavapipe). To draw more on a GPU:
//   VKFLASH_FUZZ_CASES=400 VKFLASH_FUZZ_SEED=7 VKFLASH_FUZZ_LARGE=1 vkflash_tests "[fuzz]"
// (LARGE: decode rows over up to 20k keys instead of 2k, sequences of hundreds of rows). A seed
// draws the same case under every VKFLASH_KERNELS (with the same C++ standard library, whose
// distributions' algorithms are its own); where a tensor-core family is forced, a case drawn for
// the mobile limits (no subgroup operations, which those families need) or a loop budget (the
// scalar and decode kernels' only) runs on the device's own.
// Each case prints its seed, description and kernels before it runs: rerun one alone with
// VKFLASH_FUZZ_SEED and VKFLASH_FUZZ_CASES=1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/attention_case.h"
#include "support/mask_values.h"
#include "support/sequence_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

uint32_t EnvOr(const char* name, uint32_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? uint32_t(std::strtoul(value, nullptr, 10)) : fallback;
}

std::string ForcedKernels() {
  const char* kernels = std::getenv("VKFLASH_KERNELS");
  return kernels != nullptr ? kernels : "";
}
// Whether the mobile limits' context can run here: it has no subgroup operations, which the
// tensor-core and decode families need.
bool MobileContextRuns() {
  const std::string forced = ForcedKernels();
  return forced.empty() || forced == "auto" || forced == "scalar";
}
// Whether a loop budget's context can run here: it keeps to the families whose loops stay within
// one (the scalar and decode kernels).
bool LoopBudgetContextRuns() { return MobileContextRuns() || ForcedKernels() == "decode"; }

struct FuzzCase {
  AttentionParams params;
  ScoreValues values;
  Knobs knobs = Knobs::kDevice;
};

// One draw. `large`: sequences up to a few hundred rows and decode-like KV up to 20k keys (the
// float64 reference on the CPU bounds them); else a few dozen rows and up to 2k keys.
FuzzCase DrawCase(std::mt19937& rng, bool large) {
  auto below = [&](uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng); };
  auto chance = [&](float p) { return std::uniform_real_distribution<float>(0.0f, 1.0f)(rng) < p; };
  auto between = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  static const uint32_t kHeadDims[] = {3, 16, 32, 40, 64, 80, 96, 128, 256};
  static const float kSoftcaps[] = {0.5f, 5.0f, 30.0f};

  for (;;) {
    FuzzCase c;
    AttentionParams& p = c.params;
    AttentionShape& s = p.shape;
    p.dtype = chance(0.7f) ? DataType::kFloat16 : DataType::kFloat32;
    s.batch = between(1, 2);
    s.kv_heads = between(1, 2);
    s.q_heads = s.kv_heads * between(1, 4);
    s.head_dim = kHeadDims[below(sizeof(kHeadDims) / sizeof(kHeadDims[0]))];
    if (chance(0.25f)) {  // decode and speculative rows over a KV cache
      s.q_len = between(1, 4);
      s.kv_len = between(1, large ? 20000 : 2000);
    } else {
      s.q_len = between(1, large ? 400 : 90);
      s.kv_len = between(1, large ? 600 : 120);
    }
    if (chance(0.3f)) p.causal = true;
    if (chance(0.25f)) {
      p.window.left = chance(0.2f) ? -1 : int32_t(below(s.kv_len + 1));
      p.window.right = p.causal ? (chance(0.5f) ? -1 : 0) : (chance(0.3f) ? -1 : int32_t(below(9)));
    }
    if (chance(0.2f)) p.scale = std::uniform_real_distribution<float>(0.02f, 0.6f)(rng);
    if (chance(0.3f)) p.softcap = kSoftcaps[below(3)];
    if (chance(0.25f)) p.alibi = chance(0.5f) ? AlibiSlopes::kPerHead : AlibiSlopes::kPerBatchHead;
    p.sinks = chance(0.25f);
    if (chance(0.4f)) {
      static const MaskType kTypes[] = {MaskType::kFloat32, MaskType::kFloat16, MaskType::kBool};
      p.mask = {kTypes[below(3)], chance(0.5f), chance(0.5f), chance(0.6f), chance(0.8f)};
    }
    p.deterministic = !chance(0.2f);
    if (chance(0.3f)) {  // sequences that differ: the lengths drawn above become each one's most
      const uint32_t q_most = s.q_len, kv_most = s.kv_len;
      s.batch = between(1, 3);
      auto offsets = [&](uint32_t most, std::vector<int32_t>& cu) {
        cu = {0};
        for (uint32_t b = 0; b < s.batch; ++b) cu.push_back(cu.back() + int32_t(below(most + 1)));
        return std::max<uint32_t>(uint32_t(cu.back()) + below(3), 1);  // rows past the last offset: unused
      };
      switch (below(3)) {
        case 0:  // a KV cache filled to different lengths
          for (uint32_t b = 0; b < s.batch; ++b) p.kv_lengths.push_back(int32_t(below(kv_most + 1)));
          break;
        case 1:  // ragged queries and keys
          s.q_len = offsets(q_most, p.cu_seqlens_q);
          s.kv_len = offsets(kv_most, p.cu_seqlens_k);
          break;
        default:  // ragged keys, each sequence's perhaps filled only in part
          s.kv_len = offsets(kv_most, p.cu_seqlens_k);
          if (chance(0.5f)) {
            for (uint32_t b = 0; b < s.batch; ++b)
              p.kv_lengths.push_back(int32_t(below(uint32_t(p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b]) + 1)));
          }
      }
    }
    if (chance(0.3f)) p.layout = TensorLayout::kBshd;
    if (chance(0.2f)) {  // tensors placed by strides of their own: padded rows, heads and batch entries
      auto padded = [&](uint32_t heads, uint32_t rows) {
        // Pads of multiples of 8 elements mostly (the tensor-core kernels take those strides),
        // else of single elements (the scalar kernels run).
        const uint64_t unit = chance(0.75f) ? 8 : 1, d = s.head_dim;
        const uint64_t inner_pad = unit * below(4), outer_pad = unit * below(4), batch_pad = unit * below(4);
        TensorStrides t;
        if (chance(0.5f)) {  // [B, H, N, D] order
          t.row = d + inner_pad;
          t.head = rows * t.row + outer_pad;
          t.batch = heads * t.head + batch_pad;
        } else {  // [B, N, H, D] order
          t.head = d + inner_pad;
          t.row = heads * t.head + outer_pad;
          t.batch = rows * t.row + batch_pad;
        }
        return t;
      };
      if (chance(0.5f)) p.q_strides = padded(s.q_heads, s.q_len);
      if (chance(0.5f)) p.k_strides = padded(s.kv_heads, s.kv_len);
      if (chance(0.5f)) p.v_strides = padded(s.kv_heads, s.kv_len);
      if (chance(0.5f)) p.o_strides = padded(s.q_heads, s.q_len);
      if (chance(0.5f)) p.d_o_strides = padded(s.q_heads, s.q_len);
    }
    // The mobile limits, or a loop budget of 4000 iterations (every scalar loop in chunks, as on
    // lavapipe but with chunk boundaries in far more places): drawn whether or not they run here,
    // so that a seed draws the same case under every VKFLASH_KERNELS.
    const float limits = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
    if (limits < 0.2f && MobileContextRuns()) c.knobs = Knobs::kMobile;
    if (limits >= 0.2f && limits < 0.35f && LoopBudgetContextRuns()) c.knobs = Knobs::kSmallLoopBudget;
    if (!ValidateAttentionParams(p).ok()) continue;  // e.g. a window's right side beside causal

    // Slopes from 2^-8 to 1 (the geometric series' range), per entry or head; sinks around a row's
    // LSE for unit scores (log Nk), so that P_sink is neither 0 nor 1.
    if (p.alibi != AlibiSlopes::kNone) {
      const uint32_t count = (p.alibi == AlibiSlopes::kPerBatchHead ? s.batch : 1) * s.q_heads;
      for (uint32_t i = 0; i < count; ++i) c.values.alibi_slopes.push_back(std::exp2(-8.0f * float(below(9)) / 8.0f));
    }
    if (p.sinks) {
      c.values.sinks = RandomValues(s.q_heads, DataType::kFloat32, below(1u << 30), 1.5f);
      for (float& x : c.values.sinks) x += std::log(float(s.kv_len));
    }
    // A bias of about the scores' size, a fifth of the pairs and a quarter of the 16 x 16 blocks blocked.
    if (p.mask.type != MaskType::kNone) c.values.mask = BlockSparseMaskValues(p, rng, 0.25f, 0.2f, 1.5f);
    return c;
  }
}

// What Describe leaves out: " bshd", each tensor's own strides, " kv_lengths=[...]
// cu_seqlens_q=[...] cu_seqlens_k=[...]" (those the call has).
std::string PlacementText(const AttentionParams& p) {
  std::string text = p.layout == TensorLayout::kBshd ? " bshd" : "";
  auto strides = [&](const char* name, const std::optional<TensorStrides>& t) {
    if (t) text += std::string(" ") + name + "_strides=" + std::to_string(t->batch) + "," + std::to_string(t->head) + "," +
                   std::to_string(t->row);
  };
  strides("q", p.q_strides);
  strides("k", p.k_strides);
  strides("v", p.v_strides);
  strides("o", p.o_strides);
  strides("do", p.d_o_strides);
  auto add = [&](const char* name, const std::vector<int32_t>& values) {
    if (values.empty()) return;
    text += std::string(" ") + name + "=[";
    for (size_t i = 0; i < values.size(); ++i) text += (i > 0 ? "," : "") + std::to_string(values[i]);
    text += "]";
  };
  add("kv_lengths", p.kv_lengths);
  add("cu_seqlens_q", p.cu_seqlens_q);
  add("cu_seqlens_k", p.cu_seqlens_k);
  return text;
}

// Whether the call's tensors are other than packed [B, H, N, D] with every sequence whole: those
// go through support/sequence_case.h's check.
bool PlacedOrSequenced(const AttentionParams& p) {
  return p.has_sequences() || p.layout != TensorLayout::kBhsd || p.q_strides || p.k_strides || p.v_strides ||
         p.o_strides || p.d_o_strides;
}

}  // namespace

TEST_CASE("variant fuzz: random combinations of every option match the float64 reference", "[forward][backward][fuzz]") {
  const uint32_t cases = EnvOr("VKFLASH_FUZZ_CASES", 24), first_seed = EnvOr("VKFLASH_FUZZ_SEED", 20261129);
  const bool large = EnvOr("VKFLASH_FUZZ_LARGE", 0) != 0;
  REQUIRE(cases > 0);
  uint32_t backward_cases = 0;
  for (uint32_t i = 0; i < cases; ++i) {
    const uint32_t seed = first_seed + i;
    std::mt19937 rng(seed);
    const FuzzCase c = DrawCase(rng, large);
    const AttentionParams& p = c.params;
    Context& context = SharedContext(c.knobs);
    const std::string description = "VKFLASH_FUZZ_SEED=" + std::to_string(seed) + " (" + KnobsName(c.knobs) + "): " +
                                    Describe(p) + (p.deterministic ? "" : " nondeterministic") + PlacementText(p) +
                                    "; kernels " + KernelsDescription(context, p);
    INFO(description);
    std::cout << description << std::endl;  // where a run stopped, if it is stopped

    // The backward's reference is the dearest part on the CPU: every other case of the large draw.
    const bool with_backward = !large || i % 2 == 0;
    backward_cases += with_backward;
    if (PlacedOrSequenced(p)) {
      CheckSequencesAgainstReference(context, p, c.values, seed, with_backward);
      continue;
    }
    CheckForwardAgainstReference(context, p, seed, c.values);
    if (!with_backward) continue;
    CheckGradientErrors(RunBackwardCase(context, p, seed + 1, c.values), p);
    RequireNoValidationMessages();
  }
  std::cout << "variant fuzz: " << cases << " cases from VKFLASH_FUZZ_SEED=" << first_seed << ", " << backward_cases
            << " with the backward" << std::endl;
}
