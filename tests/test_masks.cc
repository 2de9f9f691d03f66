// Masks and biases over the scores (AttentionParams::mask; docs/design.md, "What is computed"):
// additive float32 / float16 and boolean masks, each broadcast along different dimensions of
// [B, Hq, Nq, Nk], alone and with causal masks, windows, GQA, Nq != Nk, the other score variants
// and decode shapes, forward and backward (the bias's gradient too) against the float64
// reference; rows the mask blocks entirely; the bias's gradient run after run; and the parameter
// and buffer checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/backends/decode_backend.h"
#include "half.h"
#include "reference_attention.h"
#include "storage_bytes.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

AttentionMask Mask(MaskType type, bool batch, bool heads, bool rows, bool keys) { return {type, batch, heads, rows, keys}; }

// Mask values for `p`: a bias of about the scores' size (float16-rounded for a float16 mask) with
// about a fifth of the pairs blocked (-inf), or a boolean mask letting about three quarters
// through. Where the mask has rows, its row 0 blocks every key: rows the mask leaves no key.
std::vector<float> MaskValues(const AttentionParams& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  const bool boolean = p.mask.type == MaskType::kBool;
  std::vector<float> values(MaskElements(p));
  const uint64_t row_length = p.mask.keys ? p.shape.kv_len : 1;
  const uint64_t rows = p.mask.rows ? p.shape.q_len : 1;
  for (uint64_t at = 0; at < values.size(); ++at) {
    const bool first_row = p.mask.rows && at / row_length % rows == 0;
    const bool blocked = first_row || uniform(rng) < (boolean ? 0.25f : 0.2f);
    float x = normal(rng);
    if (p.mask.type == MaskType::kFloat16) x = tools::RoundToHalf(x);
    values[at] = boolean ? (blocked ? 0.0f : 1.0f) : (blocked ? -kInf : x);
  }
  return values;
}

struct MaskCase {
  AttentionMask mask;
  bool causal = false;
  AttentionWindow window;
  float softcap = 0.0f;
  AlibiSlopes alibi = AlibiSlopes::kNone;
  bool sinks = false;
};

// Each element type with a different broadcast: the full mask, one shared by the batch and heads
// (a causal-like pattern), a padding mask per batch entry ([B, 1, 1, Nk]), a per-head key bias,
// a mask that blocks whole rows ([B, 1, Nq, 1]), and the other variants with and without a softcap.
const std::vector<MaskCase> kMaskCases = {
    {Mask(MaskType::kFloat32, true, true, true, true)},
    {Mask(MaskType::kFloat16, false, false, true, true), true},
    {Mask(MaskType::kBool, true, false, false, true), false, {9, 3}},
    {Mask(MaskType::kFloat32, false, true, false, true), true},
    {Mask(MaskType::kBool, true, false, true, false)},
    {Mask(MaskType::kFloat32, true, true, true, true), true, {-1, -1}, 5.0f, AlibiSlopes::kPerHead, true},
    {Mask(MaskType::kFloat16, false, true, true, true), false, {7, 2}, 20.0f, AlibiSlopes::kPerBatchHead, true},
    // Without a softcap: the coopmat2 kernels add a float bias as a matrix (with sinks), or per
    // element (with ALiBi).
    {Mask(MaskType::kFloat32, true, true, true, true), false, {-1, -1}, 0.0f, AlibiSlopes::kNone, true},
    {Mask(MaskType::kFloat16, true, false, true, true), true, {-1, -1}, 0.0f, AlibiSlopes::kPerHead},
};

AttentionParams WithCase(AttentionParams p, const MaskCase& c) {
  p.mask = c.mask;
  p.causal = c.causal;
  p.window = c.window;
  p.softcap = c.softcap;
  p.alibi = c.alibi;
  p.sinks = c.sinks;
  return p;
}

ScoreValues ValuesFor(const AttentionParams& p, uint32_t seed) {
  ScoreValues values;
  if (p.alibi != AlibiSlopes::kNone) {
    for (uint32_t e = 0; e < (p.alibi == AlibiSlopes::kPerBatchHead ? p.shape.batch : 1); ++e)
      for (uint32_t h = 0; h < p.shape.q_heads; ++h) values.alibi_slopes.push_back(std::exp2(-8.0f * (h + 1) / p.shape.q_heads) * (e + 1));
  }
  if (p.sinks) {
    values.sinks = RandomValues(p.shape.q_heads, DataType::kFloat32, seed + 7, 1.5f);
    for (float& x : values.sinks) x += std::log(float(std::max(p.shape.kv_len, 1u)));
  }
  values.mask = MaskValues(p, seed);
  return values;
}

std::vector<AttentionParams> Sweep(const std::vector<AttentionShape>& shapes) {
  std::vector<AttentionParams> sweep;
  for (const AttentionShape& shape : shapes)
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16})
      for (const MaskCase& c : kMaskCases) sweep.push_back(WithCase(MakeParams(shape, dtype, false), c));
  return sweep;
}

// Tails that are no multiple of a tile, Nq != Nk both ways, GQA and MQA, head dims of every
// scalar kernel.
const std::vector<AttentionShape> kForwardShapes = {
    {1, 2, 2, 7, 13, 32}, {2, 4, 2, 64, 64, 64}, {1, 3, 1, 37, 101, 80}, {2, 2, 1, 9, 17, 3}};
const std::vector<AttentionShape> kBackwardShapes = {{1, 2, 2, 7, 13, 32}, {2, 2, 1, 130, 97, 128}, {1, 3, 1, 37, 61, 80}};

// Whether the mask (values as MaskValues makes them) leaves row i of (b, h) no key in its band.
bool MaskBlocksRow(const AttentionParams& p, const std::vector<float>& mask, uint32_t b, uint32_t h, uint32_t i) {
  for (uint32_t j = 0; j < p.shape.kv_len; ++j) {
    if (!tools::KeyVisible(p, i, j)) continue;
    const uint64_t at = tools::MaskIndex(p, b, h, i, j);
    if (p.mask.type == MaskType::kBool ? mask[at] != 0.0f : mask[at] != -kInf) return false;
  }
  return true;
}

// Rows the mask (or band) leaves no key: O = 0, LSE = -inf or the sink; dQ = 0. Returns how many.
uint32_t CheckBlockedRows(const AttentionParams& p, const ScoreValues& values, const ForwardRun& forward,
                          const BackwardRun* backward) {
  const AttentionShape& s = p.shape;
  uint32_t blocked = 0;
  for (uint32_t b = 0; b < s.batch; ++b)
    for (uint32_t h = 0; h < s.q_heads; ++h)
      for (uint32_t i = 0; i < s.q_len; ++i) {
        if (!MaskBlocksRow(p, values.mask, b, h, i)) continue;
        ++blocked;
        INFO("batch entry " << b << ", head " << h << ", row " << i);
        const uint64_t row = (uint64_t(b) * s.q_heads + h) * s.q_len + i;
        if (p.sinks) REQUIRE(IsSinkLse(forward.lse[row], values.sinks[h]));
        else REQUIRE(forward.lse[row] == -kInf);
        for (uint32_t d = 0; d < s.head_dim; ++d) {
          REQUIRE(forward.o[row * s.head_dim + d] == 0.0f);
          if (backward != nullptr) REQUIRE(backward->dq[row * s.head_dim + d] == 0.0f);
        }
      }
  return blocked;
}

void CheckBackward(Context& context, const AttentionParams& p, const ScoreValues& values, uint32_t seed) {
  INFO(Describe(p));
  CheckGradientErrors(RunBackwardCase(context, p, seed, values), p);
  RequireNoValidationMessages();
}

}  // namespace

TEST_CASE("masks: forward matches the float64 reference, each element type and broadcast", "[forward][mask]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 21000, blocked_rows = 0;
  for (const AttentionParams& p : Sweep(kForwardShapes)) {
    INFO(Describe(p));
    const ScoreValues values = ValuesFor(p, seed + 500);
    const ForwardRun run = RunForwardCase(context, p, seed++, values);
    CHECK(run.o_error <= ForwardTolerance(p.dtype));
    CHECK(run.lse_error <= ForwardTolerance(p.dtype));
    blocked_rows += CheckBlockedRows(p, values, run, nullptr);
    RequireNoValidationMessages();
  }
  CHECK(blocked_rows > 0);  // the sweep has rows the mask leaves no key
}

TEST_CASE("masks: backward and the bias's gradient match the float64 reference", "[backward][mask]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 22000;
  for (const AttentionParams& p : Sweep(kBackwardShapes)) {
    CheckBackward(context, p, ValuesFor(p, seed + 500), seed);
    ++seed;
  }
}

TEST_CASE("masks: rows the mask blocks entirely get zeros, -inf or the sink, and zero gradients", "[forward][backward][mask]") {
  Context& context = SharedContext(Knobs::kDevice);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (bool sinks : {false, true}) {
      AttentionParams p = MakeParams({2, 4, 2, 50, 70, 64}, dtype, false);
      p.mask = Mask(MaskType::kFloat32, true, true, true, true);
      p.sinks = sinks;
      p.softcap = 10.0f;
      INFO(Describe(p));
      const ScoreValues values = ValuesFor(p, 23000);
      const ForwardRun forward = RunForwardCase(context, p, 23001, values);
      const BackwardRun backward = RunBackwardCase(context, p, 23001, values);
      CHECK(forward.o_error <= ForwardTolerance(dtype));
      CHECK(backward.dq_error <= BackwardTolerance(dtype));
      CHECK(backward.dbias_error <= BackwardTolerance(dtype));
      CHECK(CheckBlockedRows(p, values, forward, &backward) == 2 * 4);  // row 0 of each (b, h)
      // A blocked row's bias gets no gradient.
      for (uint32_t bh = 0; bh < 2 * 4; ++bh)
        for (uint32_t j = 0; j < 70; ++j) REQUIRE(backward.dbias[uint64_t(bh) * 50 * 70 + j] == 0.0f);
      RequireNoValidationMessages();
    }
  }
}

TEST_CASE("masks: keys far below an earlier tile's largest score keep O's precision", "[forward][mask]") {
  // Q = 0; key 0 alone in its tile (keys 1-255 blocked) with V = 0 holds each row's max, the keys
  // 256-428 lie 15.72 below it: their P are float16 subnormals relative to the row's running max,
  // yet O (about 0.02 with V in [750, ~1000)) is well inside float16's range. Kernels that round P
  // to float16 must do so relative to each tile's own largest score. The second case adds whole
  // tiles of keys 100 below the max with V = 60000 (keys 512-639; 429-511 blocked): nothing in O,
  // but a reference that followed their tiles down (2^-144) would scale O's sums past float32, and
  // one clamped 64 below the max must move O and l there by an exact power of two: exp2(41.32)
  // put 4% of itself into this LSE of 2.6e-5 (docs/tuning-log.md, "whole-number reference depths").
  for (bool far_tiles : {false, true}) {
    Context& context = SharedContext(Knobs::kDevice);
    AttentionParams p = MakeParams({1, 2, 1, 64, far_tiles ? 640u : 429u, 64}, DataType::kFloat16, false);
    p.mask = Mask(MaskType::kFloat32, false, false, false, true);
    INFO(Describe(p) << MaskName(p.mask));
    const AttentionShape& s = p.shape;
    ScoreValues values;
    values.mask.resize(MaskElements(p));
    for (uint32_t j = 0; j < s.kv_len; ++j)
      values.mask[j] = j == 0 ? 0.0f : j < 256 ? -kInf : j < 429 ? -15.72f : j < 512 ? -kInf : -100.0f;
    std::vector<float> v = RandomValues(s.kv_elements(), p.dtype, 26900, 250.0f);
    for (float& x : v) x = tools::RoundToHalf(750.0f + std::fabs(x) / 4.0f);  // [750, ~1000)
    for (uint32_t d = 0; d < s.head_dim; ++d) v[d] = 0.0f;                    // key 0's row
    for (uint64_t i = 512 * uint64_t(s.head_dim); i < v.size(); ++i) v[i] = 60000.0f;
    const ForwardRun run = RunForwardWith(context, p, std::vector<float>(s.q_elements(), 0.0f),
                                          RandomValues(s.kv_elements(), p.dtype, 26901), v, values);
    CHECK(run.o_error <= ForwardTolerance(p.dtype));
    CHECK(run.lse_error <= ForwardTolerance(p.dtype));
    RequireNoValidationMessages();
  }
}

TEST_CASE("masks: a padding mask over a KV cache, decode and speculative rows", "[forward][backward][decode][mask]") {
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 24000;
  for (bool causal : {false, true}) {
    AttentionParams p = MakeParams({2, 8, 2, 1, 3000, 128}, DataType::kFloat16, causal);
    p.mask = Mask(MaskType::kBool, true, false, false, true);
    CheckForwardAgainstReference(context, p, seed, ValuesFor(p, seed));
    p.mask = Mask(MaskType::kFloat16, true, true, true, true);
    p.sinks = true;
    CheckForwardAgainstReference(context, p, seed + 1, ValuesFor(p, seed + 1));
    p = MakeParams({2, 8, 2, 4, 700, 64}, DataType::kFloat32, causal);
    p.mask = Mask(MaskType::kFloat32, false, true, true, true);
    CheckForwardAgainstReference(context, p, seed + 2, ValuesFor(p, seed + 2));
    CheckBackward(context, p, ValuesFor(p, seed + 3), seed + 3);
    seed += 4;
  }
}

TEST_CASE("masks: the tensor-core decode kernel's packed rows each add their own mask row, each broadcast",
          "[forward][decode][mask]") {
  // Its packed rows are head-major (row r: query row r % q_len of the group's head r / q_len), each
  // reading its own mask row per element (mask_packed): a mask per head, shared by the heads, with
  // and without rows or keys; q_len 1 and more, up to 40 packed rows (no multiple of the tile's);
  // key counts of whole 16-byte words and not. Where the tensor-core kernel does not run, the same
  // calls check another family.
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 27000;
  const std::vector<AttentionShape> shapes = {
      {2, 16, 1, 1, 520, 64}, {2, 8, 2, 4, 501, 128}, {1, 8, 1, 5, 1024, 64}, {2, 12, 2, 3, 768, 128}};
  const std::vector<MaskCase> cases = {
      {Mask(MaskType::kFloat32, true, true, true, true)},
      {Mask(MaskType::kFloat32, false, false, true, true), true},
      {Mask(MaskType::kFloat32, true, false, false, true)},
      {Mask(MaskType::kFloat32, false, true, false, true), true},
      {Mask(MaskType::kFloat32, true, false, true, false)},
      {Mask(MaskType::kFloat32, false, true, true, true), false, {-1, -1}, 0.0f, AlibiSlopes::kNone, true},
  };
  for (const AttentionShape& shape : shapes) {
    for (const MaskCase& c : cases) {
      for (MaskType type : {MaskType::kFloat32, MaskType::kFloat16}) {
        AttentionParams p = WithCase(MakeParams(shape, DataType::kFloat16, false), c);
        p.mask.type = type;
        INFO(Describe(p) << MaskName(p.mask));
        RequireDecodeWhereUsed(context, p);
        CheckForwardAgainstReference(context, p, seed, ValuesFor(p, seed));
        ++seed;
      }
    }
  }
}

// The keys the block-sparse cases close for every row and hold NaN in K and V: 128 or a little more
// from key 128 on, rounded to whole key tiles of every kernel that runs the call (the forward's and
// both gradient kernels') and to the mask summary's 16-key blocks. The contract wants a blocked
// key's K and V finite (docs/design.md), broken on purpose: a kernel that visited those tiles would
// return NaN, which only whole tiles make a fair test of (the NV subgroup-scope forward's key tile is
// 48 at D <= 64).
struct KeyRange {
  uint32_t begin = 0, end = 0;
};
KeyRange PoisonedKeys(Context& context, const AttentionParams& p) {
  uint32_t tile = 16;
  const auto take = [&](uint32_t block_kv) { tile = block_kv > 0 ? std::lcm(tile, block_kv) : tile; };
  auto forward = context.ChooseForwardKernel(p);
  REQUIRE(forward.ok());
  take(forward->block_kv);
  auto backward = context.ChooseBackwardKernels(p);
  REQUIRE(backward.ok());
  take(backward->dkdv.block_kv);
  take(backward->dq.block_kv);
  const uint32_t begin = (128 + tile - 1) / tile * tile;
  INFO("key tiles' least common multiple " << tile);
  REQUIRE(begin < p.shape.kv_len);
  return {begin, std::min(p.shape.kv_len, begin + (128 + tile - 1) / tile * tile)};
}

// A mask of 16 x 16 blocks (the summary's), each block open or closed at random per mask head,
// the keys `closed` for every row, and where the mask has rows and there are more than 140, rows
// [0, 140) closed for every key (query tiles the mask closes whole); what is left open blocks
// about a fifth of its pairs.
std::vector<float> BlockSparseMask(const AttentionParams& p, const KeyRange& closed, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  const AttentionShape& s = p.shape;
  const AttentionMask& m = p.mask;
  const bool boolean = m.type == MaskType::kBool;
  const uint32_t rows = m.rows ? s.q_len : 1, keys = m.keys ? s.kv_len : 1;
  const uint32_t row_blocks = (rows + 15) / 16, key_blocks = (keys + 15) / 16;
  std::vector<float> values(MaskElements(p));
  for (uint32_t b = 0; b < (m.batch ? s.batch : 1); ++b)
    for (uint32_t h = 0; h < (m.heads ? s.q_heads : 1); ++h) {
      std::vector<bool> closed_blocks(uint64_t(row_blocks) * key_blocks);
      for (uint64_t i = 0; i < closed_blocks.size(); ++i) closed_blocks[i] = uniform(rng) < 0.5f;
      for (uint32_t i = 0; i < rows; ++i)
        for (uint32_t j = 0; j < keys; ++j) {
          const bool blocked = closed_blocks[uint64_t(i / 16) * key_blocks + j / 16] || (j >= closed.begin && j < closed.end) ||
                               (rows > 140 && i < 140) || uniform(rng) < 0.2f;
          const float bias = blocked ? -kInf : tools::RoundToHalf(uniform(rng) * 2.0f - 1.0f);
          values[tools::MaskIndex(p, b, h, i, j)] = boolean ? (blocked ? 0.0f : 1.0f) : bias;
        }
    }
  return values;
}

// A mask whose 64-key tiles are each open for one query row only: row (tile + h) % q_len of mask
// head h, about four pairs in five open there (a bias of about the scores' size, float16-rounded),
// every other pair blocked.
std::vector<float> OneRowPerTileMask(const AttentionParams& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  const AttentionShape& s = p.shape;
  const AttentionMask& m = p.mask;
  std::vector<float> values(MaskElements(p));
  for (uint32_t b = 0; b < (m.batch ? s.batch : 1); ++b)
    for (uint32_t h = 0; h < (m.heads ? s.q_heads : 1); ++h)
      for (uint32_t i = 0; i < s.q_len; ++i)
        for (uint32_t j = 0; j < s.kv_len; ++j) {
          const bool open = (j / 64 + h) % s.q_len == i && uniform(rng) < 0.8f;
          const float bias = open ? tools::RoundToHalf(uniform(rng) * 2.0f - 1.0f) : -kInf;
          values[tools::MaskIndex(p, b, h, i, j)] = m.type == MaskType::kBool ? (open ? 1.0f : 0.0f) : bias;
        }
  return values;
}

// NaN in the K and V rows of the keys `closed` of every batch entry and KV head.
void PoisonClosedKeys(const AttentionShape& shape, const KeyRange& closed, std::vector<float>* k, std::vector<float>* v) {
  for (uint32_t b = 0; b < shape.batch; ++b)
    for (uint32_t h = 0; h < shape.kv_heads; ++h)
      for (uint32_t j = closed.begin; j < closed.end; ++j)
        for (uint32_t d = 0; d < shape.head_dim; ++d) {
          const uint64_t at = ((uint64_t(b) * shape.kv_heads + h) * shape.kv_len + j) * shape.head_dim + d;
          (*k)[at] = (*v)[at] = std::numeric_limits<float>::quiet_NaN();
        }
}

// A call's inputs from `seed`: BlockSparseMask's mask, random Q, K, V and dO, and NaN in the K and
// V of the keys the mask closes for every row (PoisonedKeys, PoisonClosedKeys).
struct BlockSparseInputs {
  ScoreValues values;
  std::vector<float> q, k, v, d_o;
};
BlockSparseInputs PoisonedBlockSparseInputs(Context& context, const AttentionParams& p, uint32_t seed) {
  const AttentionShape& s = p.shape;
  const KeyRange closed = PoisonedKeys(context, p);
  BlockSparseInputs in;
  in.values.mask = BlockSparseMask(p, closed, seed);
  in.q = RandomValues(s.q_elements(), p.dtype, seed + 1);
  in.k = RandomValues(s.kv_elements(), p.dtype, seed + 2);
  in.v = RandomValues(s.kv_elements(), p.dtype, seed + 3);
  in.d_o = RandomValues(s.q_elements(), p.dtype, seed + 4);
  PoisonClosedKeys(s, closed, &in.k, &in.v);
  return in;
}

TEST_CASE("masks: tiles the mask closes are skipped, their K and V never read", "[forward][backward][mask]") {
  // NaN in the K and V rows of the keys the mask closes for every row (about [128, 256),
  // PoisonedKeys): a kernel that visited their tiles would multiply them by P = 0 and return NaN; one that skips them
  // matches the reference (which never reads blocked keys). Prefill shapes (every family's tiles,
  // row tiles that end inside a block, query tiles the mask closes whole) and decode shapes (the
  // tensor-core decode kernel's tiles; the register decode kernel selects instead of multiplying,
  // so there this shows only that its skipping keeps the results). Masks per head, and per batch
  // entry without heads (one walk for every packed head in the decode kernels).
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 26000;
  struct Case {
    AttentionShape shape;
    AttentionMask mask;
  };
  std::vector<Case> cases;
  // The fifth shape runs the kernels' walks over the summary past one group of 32 blocks (512
  // rows or keys) in both directions.
  for (const AttentionShape& shape : {AttentionShape{1, 4, 2, 150, 400, 64}, AttentionShape{1, 8, 2, 1, 600, 128},
                                      AttentionShape{1, 4, 1, 3, 300, 64}, AttentionShape{1, 2, 2, 70, 290, 128},
                                      AttentionShape{1, 2, 1, 600, 1100, 32}}) {
    for (MaskType type : {MaskType::kBool, MaskType::kFloat32, MaskType::kFloat16}) {
      cases.push_back({shape, Mask(type, false, true, true, true)});
    }
  }
  for (const AttentionShape& shape : {AttentionShape{2, 4, 2, 150, 400, 64}, AttentionShape{2, 8, 2, 1, 600, 128},
                                      AttentionShape{2, 4, 1, 3, 300, 64}}) {
    cases.push_back({shape, Mask(MaskType::kFloat16, true, false, true, true)});
    cases.push_back({shape, Mask(MaskType::kBool, true, false, false, true)});
  }
  for (const Case& c : cases) {
    for (bool causal : {false, true}) {
      AttentionParams p = MakeParams(c.shape, DataType::kFloat16, causal);
      p.mask = c.mask;
      INFO(Describe(p) << MaskName(p.mask));
      const BlockSparseInputs in = PoisonedBlockSparseInputs(context, p, seed);
      const ForwardRun forward = RunForwardWith(context, p, in.q, in.k, in.v, in.values);
      CHECK(forward.o_error <= ForwardTolerance(p.dtype));
      CHECK(forward.lse_error <= ForwardTolerance(p.dtype));
      RequireDecodeWhereUsed(context, p);
      if (c.shape.q_len > 1) CheckGradientErrors(RunBackwardWith(context, p, in.q, in.k, in.v, in.d_o, in.values), p);
      RequireNoValidationMessages();
      seed += 5;
    }
  }
}

TEST_CASE("masks: with deterministic = false, the atomic dQ kernels skip the tiles the mask closes too",
          "[backward][mask][atomic]") {
  // With atomic dQ, each dK/dV workgroup starts its query loop at a tile of its own and wraps
  // around; the tiles the mask closes are passed over in that order. Few query tiles, where atomic
  // dQ runs on the devices that have it (elsewhere the deterministic kernels run: the same checks).
  // The mask as in the test above: NaN in the K and V of keys it closes for every row (a kernel
  // that visited them fails), and query rows [0, 140) it closes for every key.
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 27000;
  for (const AttentionShape& shape : {AttentionShape{1, 4, 2, 600, 400, 64}, AttentionShape{1, 2, 1, 300, 700, 128}}) {
    for (bool causal : {false, true}) {
      AttentionParams p = MakeParams(shape, DataType::kFloat16, causal);
      p.deterministic = false;
      const bool atomic_without_mask = ExpectAtomicDq(context, p);
      p.mask = Mask(MaskType::kFloat32, false, true, true, true);
      const bool atomic = ExpectAtomicDq(context, p);
      REQUIRE(atomic == atomic_without_mask);  // where the device runs atomic dQ, this test reaches it
      INFO(Describe(p) << MaskName(p.mask) << (atomic ? ", atomic dQ" : ", the deterministic kernels"));
      auto choice = context.ChooseBackwardKernels(p);
      REQUIRE(choice.ok());
      REQUIRE(choice->atomic_dq == atomic);
      const BlockSparseInputs in = PoisonedBlockSparseInputs(context, p, seed);
      CheckGradientErrors(RunBackwardWith(context, p, in.q, in.k, in.v, in.d_o, in.values), p);
      RequireNoValidationMessages();
      seed += 5;
    }
  }
}

TEST_CASE("masks: the decode kernels read the mask's terms for the packed rows that differ, and the summary where "
          "a scan would cost more",
          "[decode][mask]") {
  using attention::DecodeMaskTermRows;
  using attention::DecodeReadsMaskSummary;
  AttentionParams p = MakeParams({2, 8, 4, 3, 500, 64}, DataType::kFloat16, false);  // 2 heads x 3 rows packed
  auto term_rows = [](const AttentionParams& params) {
    auto call = attention::ResolveCallLayout(params, false);
    REQUIRE(call.ok());
    return DecodeMaskTermRows(*call);
  };
  CHECK(term_rows(p) == 1);  // no mask
  p.mask = Mask(MaskType::kFloat32, true, false, false, true);
  CHECK(term_rows(p) == 1);
  p.mask = Mask(MaskType::kFloat16, true, false, true, true);
  CHECK(term_rows(p) == 3);
  p.mask = Mask(MaskType::kBool, false, true, false, true);
  CHECK(term_rows(p) == 6);
  // Ragged queries: lengths that differ pack differently (every row its own terms); equal ones, or
  // a sequence without queries beside them, pack as one q_len.
  p.mask = Mask(MaskType::kFloat16, false, false, true, true);
  p.shape = {3, 8, 4, 6, 500, 64};
  p.cu_seqlens_q = {0, 3, 5, 6};
  CHECK(term_rows(p) == 6);
  p.cu_seqlens_q = {0, 2, 4, 6};
  CHECK(term_rows(p) == 2);
  p.cu_seqlens_q = {0, 3, 3, 6};
  CHECK(term_rows(p) == 3);

  // The register kernel reads the summary past kMaskTermsMaxSteps steps; the tensor-core kernel past
  // VKF_DECODE_SCAN_MAX_TILES tiles or kMaskScanMaxPerInvocation elements an invocation.
  KernelChoice registers;
  registers.kernel = "forward_f16_decode";
  registers.block_kv = 64;
  CHECK_FALSE(DecodeReadsMaskSummary(registers, attention::kMaskTermsMaxSteps * 64, 8));
  CHECK(DecodeReadsMaskSummary(registers, attention::kMaskTermsMaxSteps * 64 + 1, 1));
  KernelChoice tensor_cores;
  tensor_cores.kernel = "forward_f16_decode_coopmat2";
  tensor_cores.block_kv = 64;
  tensor_cores.workgroup_size = 128;
  // The closed-steps test's parts (3008, 384 and 128 keys) with 16 packed rows of Nq = 4.
  for (uint32_t rows : {1u, 4u, 16u}) {
    CHECK(DecodeReadsMaskSummary(tensor_cores, 3008, rows));
    CHECK(DecodeReadsMaskSummary(tensor_cores, 384, rows) == (rows * 384 > attention::kMaskScanMaxPerInvocation * 128));
    CHECK(DecodeReadsMaskSummary(tensor_cores, 128, rows) == (rows > attention::kMaskScanMaxPerInvocation));
  }
  CHECK_FALSE(DecodeReadsMaskSummary(tensor_cores, 128, 4));  // the scan's way is taken by the test above
  CHECK(DecodeReadsMaskSummary(tensor_cores, VKF_DECODE_SCAN_MAX_TILES * 64 + 64, 1));
}

TEST_CASE("masks: the decode kernels' closed steps, from the summary (long parts) or the mask (short)",
          "[forward][decode][mask]") {
  // The decode kernels read the mask's block summary where a part is long, and otherwise the
  // mask's own elements (DecodeReadsMaskSummary): the register kernel (up to 8 packed rows) two
  // steps ahead, the tensor-core kernel (16 packed rows, where it runs) in a scan before its loop
  // (a mask without heads: with heads, 16 rows scan too many elements and read the summary).
  // One part of 3000 keys (47 steps of 64 at D = 128), 8 parts of 384 (6 steps: the register
  // kernel's loop reads terms two steps ahead) and 32 asked for, 24 of 128 keys, with the
  // block-sparse mask and the NaN keys of the test above, each element type (float32 with a
  // softcap, ALiBi and sinks). Reading the mask's elements, the kernels read the terms of the
  // packed rows that differ (DecodeMaskTermRows): every row (a mask with heads), the query rows
  // (one without heads) or one row (without heads or rows).
  static_assert(6 <= attention::kMaskTermsMaxSteps && 47 > attention::kMaskTermsMaxSteps,
                "the part counts must take the register kernel's two ways");
  // (DecodeReadsMaskSummary's own test below checks the tensor-core kernel's ways for these parts.)
  uint32_t seed = 26500;
  for (uint32_t splits : {1u, 8u, 32u}) {
    ContextOptions options = ValidatedOptions();
    options.tile_overrides.decode_splits = splits;
    auto context = Context::Create(options);
    REQUIRE(context.ok());
    for (const AttentionShape& shape : {AttentionShape{2, 8, 2, 1, 3000, 128}, AttentionShape{1, 8, 4, 4, 3000, 64},
                                        AttentionShape{1, 8, 2, 4, 3000, 128}}) {
      for (const AttentionMask& mask : {Mask(MaskType::kFloat32, true, true, true, true),
                                        Mask(MaskType::kFloat16, false, true, false, true),
                                        Mask(MaskType::kBool, true, false, false, true),
                                        Mask(MaskType::kFloat16, false, false, true, true)}) {
        AttentionParams p = MakeParams(shape, DataType::kFloat16, seed % 2 == 0);
        p.mask = mask;
        if (mask.type == MaskType::kFloat32) {  // the mask's term after the softcap and ALiBi, sinks beside
          p.softcap = 20.0f;
          p.alibi = AlibiSlopes::kPerHead;
          p.sinks = true;
        }
        INFO(Describe(p) << MaskName(p.mask) << ", decode_splits " << splits);
        RequireDecodeWhereUsed(**context, p);
        ScoreValues values = ValuesFor(p, seed);
        const KeyRange closed = PoisonedKeys(**context, p);
        values.mask = BlockSparseMask(p, closed, seed);
        std::vector<float> k = RandomValues(shape.kv_elements(), p.dtype, seed + 2);
        std::vector<float> v = RandomValues(shape.kv_elements(), p.dtype, seed + 3);
        PoisonClosedKeys(shape, closed, &k, &v);
        const ForwardRun forward =
            RunForwardWith(**context, p, RandomValues(shape.q_elements(), p.dtype, seed + 1), k, v, values);
        CHECK(forward.o_error <= ForwardTolerance(p.dtype));
        CHECK(forward.lse_error <= ForwardTolerance(p.dtype));
        RequireNoValidationMessages();
        seed += 5;
      }
    }
  }
}

TEST_CASE("masks: the decode kernels skip a key tile only where the mask closes it for every packed row",
          "[forward][decode][mask]") {
  // Each 64-key tile (the tensor-core decode kernel's; whole steps of the register kernel's key
  // groups) is open for one query row only: row (tile + head) % q_len of each head where the mask
  // has heads (the bool one), row tile % q_len of every head where it has none, about four pairs in
  // five open there. So every tile is open for some packed rows and closed for the others, and a
  // kernel that decides a tile's fate from the wrong rows (its scan, verdict or summary mapping
  // packed rows to mask rows wrongly) skips pairs a row sees: O and LSE move by far more than the
  // tolerance. The shapes pack 16 (tensor cores, where they run), 8 and 3 rows. Which way each call
  // takes (DecodeReadsMaskSummary): the tensor-core kernel scans with 32 parts where the mask has
  // no heads and reads the summary otherwise; the register kernel reads the terms except with 8
  // packed rows in one part (the summary).
  uint32_t seed = 26900;
  for (uint32_t splits : {1u, 32u}) {
    ContextOptions options = ValidatedOptions();
    options.tile_overrides.decode_splits = splits;
    auto context = Context::Create(options);
    REQUIRE(context.ok());
    for (const AttentionShape& shape : {AttentionShape{1, 8, 2, 4, 2000, 128}, AttentionShape{1, 8, 4, 4, 2000, 64},
                                        AttentionShape{2, 4, 4, 3, 1000, 64}}) {
      for (const AttentionMask& mask : {Mask(MaskType::kFloat16, false, false, true, true),
                                        Mask(MaskType::kBool, false, true, true, true),
                                        Mask(MaskType::kFloat32, true, false, true, true)}) {
        AttentionParams p = MakeParams(shape, DataType::kFloat16, false);
        p.mask = mask;
        INFO(Describe(p) << MaskName(p.mask) << ", decode_splits " << splits);
        RequireDecodeWhereUsed(**context, p);
        ScoreValues values;
        values.mask = OneRowPerTileMask(p, seed);
        const ForwardRun forward = RunForwardWith(**context, p, RandomValues(shape.q_elements(), p.dtype, seed + 1),
                                                  RandomValues(shape.kv_elements(), p.dtype, seed + 2),
                                                  RandomValues(shape.kv_elements(), p.dtype, seed + 3), values);
        CHECK(forward.o_error <= ForwardTolerance(p.dtype));
        CHECK(forward.lse_error <= ForwardTolerance(p.dtype));
        RequireNoValidationMessages();
        seed += 5;
      }
    }
  }
}

TEST_CASE("masks: loops of more than 1024 tiles skip closed tiles past the first 1024 too", "[forward][backward][mask]") {
  // The coopmat2 forward and dK/dV kernels find the closed tiles of their loop's first 1024 tiles
  // up front and read the summary at each later step (common/closed_tiles.glsl); other families
  // walk the summary (common/score_mod.glsl). The shapes are sized from the tiles of the kernels
  // that run: 1094 of the forward's key tiles (70016 keys with the H100's 64), then 1042 of the
  // dK/dV kernel's query steps (50016 rows with its 48 at head dim 128). In the first, at least
  // 128 keys from the forward's tile 1080, rounded down to whole tiles of all three kernels' keys,
  // are closed for every row and NaN in K and V: the contract wants a blocked key's K and V finite
  // (docs/design.md), broken here on purpose, so that a kernel that visited those tiles would return NaN.
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 26800;
  for (const bool long_keys : {true, false}) {
    AttentionParams p = MakeParams(long_keys ? AttentionShape{1, 1, 1, 100, 70000, 32} : AttentionShape{1, 1, 1, 50000, 96, 128},
                                   DataType::kFloat16, false);
    p.mask = Mask(MaskType::kFloat16, false, false, true, true);
    auto forward_kernel = context.ChooseForwardKernel(p);
    auto backward_kernels = context.ChooseBackwardKernels(p);
    REQUIRE((forward_kernel.ok() && backward_kernels.ok()));
    const KernelChoice chosen_forward = *forward_kernel, chosen_dkdv = backward_kernels->dkdv;
    if (long_keys) {
      p.shape.kv_len = 1094 * chosen_forward.block_kv;
    } else {
      p.shape.q_len = 1042 * chosen_dkdv.block_q;
    }
    forward_kernel = context.ChooseForwardKernel(p);
    backward_kernels = context.ChooseBackwardKernels(p);
    REQUIRE((forward_kernel.ok() && backward_kernels.ok()));
    REQUIRE(forward_kernel->block_kv == chosen_forward.block_kv);  // the sizes hold for the kernels that run
    REQUIRE(backward_kernels->dkdv.block_q == chosen_dkdv.block_q);
    const AttentionShape& shape = p.shape;
    INFO(Describe(p) << MaskName(p.mask) << "; " << KernelsDescription(context, p));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    uint32_t closed_begin = 0, closed_end = 0;  // none closed in the second shape
    if (long_keys) {
      const uint32_t tile = std::lcm(forward_kernel->block_kv,
                                     std::lcm(backward_kernels->dkdv.block_kv, backward_kernels->dq.block_kv));
      REQUIRE(tile > 0);
      closed_begin = 1080 * forward_kernel->block_kv / tile * tile;
      closed_end = closed_begin + (128 + tile - 1) / tile * tile;
      INFO("keys [" << closed_begin << ", " << closed_end << ") closed");
      REQUIRE(closed_begin / forward_kernel->block_kv >= 1024);
      REQUIRE(closed_end <= shape.kv_len);
    }
    ScoreValues values;
    values.mask.resize(MaskElements(p));
    for (uint32_t i = 0; i < shape.q_len; ++i)
      for (uint32_t j = 0; j < shape.kv_len; ++j) {
        const bool blocked = (j >= closed_begin && j < closed_end) || uniform(rng) < 0.2f;
        values.mask[tools::MaskIndex(p, 0, 0, i, j)] = blocked ? -kInf : tools::RoundToHalf(uniform(rng) * 2.0f - 1.0f);
      }
    std::vector<float> q = RandomValues(shape.q_elements(), p.dtype, seed + 1);
    std::vector<float> k = RandomValues(shape.kv_elements(), p.dtype, seed + 2);
    std::vector<float> v = RandomValues(shape.kv_elements(), p.dtype, seed + 3);
    const std::vector<float> d_o = RandomValues(shape.q_elements(), p.dtype, seed + 4);
    for (uint32_t j = closed_begin; j < std::min(closed_end, shape.kv_len); ++j)
      for (uint32_t d = 0; d < shape.head_dim; ++d) k[uint64_t(j) * shape.head_dim + d] = v[uint64_t(j) * shape.head_dim + d] = std::nanf("");
    const ForwardRun forward = RunForwardWith(context, p, q, k, v, values);
    CHECK(forward.o_error <= ForwardTolerance(p.dtype));
    CHECK(forward.lse_error <= ForwardTolerance(p.dtype));
    const BackwardRun backward = RunBackwardWith(context, p, q, k, v, d_o, values);
    CHECK(backward.dq_error <= BackwardTolerance(p.dtype));
    CHECK(backward.dk_error <= BackwardTolerance(p.dtype));
    CHECK(backward.dv_error <= BackwardTolerance(p.dtype));
    RequireNoValidationMessages();
    seed += 5;
  }
}

TEST_CASE("masks: the bias's gradient is bit-identical run after run, summed over broadcast dimensions",
          "[backward][mask]") {
  Context& context = SharedContext(Knobs::kDevice);
  // (A mask without the keys dimension would have a gradient of 0: a bias the same for every key
  // of a row does not change its softmax.)
  for (const AttentionMask& mask : {Mask(MaskType::kFloat16, false, false, true, true), Mask(MaskType::kFloat32, true, false, false, true),
                                    Mask(MaskType::kFloat32, false, true, false, true)}) {
    AttentionParams p = MakeParams({2, 4, 2, 90, 75, 64}, DataType::kFloat16, true);
    p.mask = mask;
    INFO(Describe(p));
    const ScoreValues values = ValuesFor(p, 25000);
    const BackwardRun first = RunBackwardCase(context, p, 25001, values);
    const BackwardRun second = RunBackwardCase(context, p, 25001, values);
    REQUIRE(first.dbias.size() == MaskElements(p));
    CHECK(std::memcmp(first.dbias.data(), second.dbias.data(), first.dbias.size() * sizeof(float)) == 0);
    CHECK(first.dbias_error <= BackwardTolerance(p.dtype));
    RequireNoValidationMessages();
  }
}

TEST_CASE("masks: the gradient of a bias without the keys dimension is 0, as the softmax cannot see it",
          "[backward][mask]") {
  // A bias the same for every key of a row ([B, Hq, Nq, 1], [1, 1, Nq, 1]) shifts the row's scores
  // alike: dBias = sum_j dS_j = sum_j P_j (dP_j - delta) = 0. The kernels sum the row's dS in float32:
  // 0 to its rounding (a sum that forgot delta would be of the order of dP, about 1 here).
  Context& context = SharedContext(Knobs::kDevice);
  for (const AttentionMask& mask : {Mask(MaskType::kFloat32, true, true, true, false), Mask(MaskType::kFloat16, false, false, true, false)}) {
    AttentionParams p = MakeParams({2, 4, 2, 40, 70, 32}, DataType::kFloat32, true);
    p.mask = mask;
    INFO(Describe(p) << MaskName(p.mask));
    const BackwardRun run = RunBackwardCase(context, p, 25100, ValuesFor(p, 25100));
    REQUIRE(run.dbias.size() == MaskElements(p));
    double largest = 0.0;
    for (float x : run.dbias) largest = std::max(largest, double(std::fabs(x)));
    CHECK(largest <= 1e-5);
    CHECK(run.dq_error <= BackwardTolerance(p.dtype));
    RequireNoValidationMessages();
  }
}

TEST_CASE("masks: with sinks, a bias without the keys dimension gets the sinks' share of the gradient",
          "[backward][mask][sinks]") {
  // With sinks the row's keys share 1 - P_sink, so dBias = sum_j dS_j = P_sink * delta: a gradient
  // of its own, here large enough to check against its own norm (sinks near the rows' LSE for unit
  // scores, P_sink about a half). The fuzz's DbiasError measures such elements against their
  // terms' magnitudes, which a kernel that left the sink's share out (0, as without sinks) could
  // pass where P_sink is small; this case cannot.
  Context& context = SharedContext(Knobs::kDevice);
  uint32_t seed = 25200;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (const AttentionMask& mask : {Mask(MaskType::kFloat32, true, true, true, false), Mask(MaskType::kFloat16, false, true, false, false)}) {
      AttentionParams p = MakeParams({2, 4, 2, 45, 70, 64}, dtype, false);
      p.mask = mask;
      p.sinks = true;
      INFO(Describe(p) << MaskName(p.mask));
      ScoreValues values;
      values.sinks.assign(p.shape.q_heads, std::log(70.0f) + 0.5f);
      values.mask = RandomValues(MaskElements(p), mask.type == MaskType::kFloat16 ? DataType::kFloat16 : DataType::kFloat32,
                                 seed, 0.5f);
      const BackwardRun run = RunBackwardCase(context, p, seed++, values);
      REQUIRE(run.dbias.size() == MaskElements(p));
      CHECK(tools::RelativeError(run.dbias, run.ref_dbias) <= BackwardTolerance(dtype));
      CHECK(run.dsinks_error <= BackwardTolerance(dtype));
      RequireNoValidationMessages();
    }
  }
}

TEST_CASE("mask parameters and buffers: checked, and refused before anything runs", "[api][mask]") {
  AttentionParams p = MakeParams({2, 4, 2, 10, 12, 16}, DataType::kFloat32, false);
  p.mask.type = MaskType(9);
  CHECK(ValidateAttentionParams(p).code() == ErrorCode::kInvalidArgument);
  p.mask = Mask(MaskType::kFloat16, true, false, true, true);
  REQUIRE(ValidateAttentionParams(p).ok());
  CHECK(MaskElements(p) == 2 * 10 * 12);
  CHECK(MaskBytes(p) == 2 * 10 * 12 * 2);
  p.mask = Mask(MaskType::kBool, false, false, false, true);
  CHECK(MaskElements(p) == 12);
  CHECK(MaskBytes(p) == 12);
  p.mask = Mask(MaskType::kBool, false, false, true, false);
  CHECK(MaskBytes(p) == 12);  // 10 bytes, whole words
  p.mask = {};
  CHECK(MaskElements(p) == 0);

  Context& context = SharedContext(Knobs::kDevice);
  const AttentionShape& s = p.shape;
  const std::vector<uint8_t> marked(s.q_elements() * 4, 0x5a);
  Buffer q = UploadedBuffer(context, std::vector<uint8_t>(s.q_elements() * 4));
  Buffer k = UploadedBuffer(context, std::vector<uint8_t>(s.kv_elements() * 4));
  Buffer v = UploadedBuffer(context, std::vector<uint8_t>(s.kv_elements() * 4));
  Buffer lse = UploadedBuffer(context, std::vector<uint8_t>(s.lse_elements() * 4));
  Buffer d_o = UploadedBuffer(context, std::vector<uint8_t>(s.q_elements() * 4));
  Buffer o = UploadedBuffer(context, marked), dq = UploadedBuffer(context, marked);
  Buffer dk = UploadedBuffer(context, std::vector<uint8_t>(s.kv_elements() * 4));
  Buffer dv = UploadedBuffer(context, std::vector<uint8_t>(s.kv_elements() * 4));
  const AttentionMask full = Mask(MaskType::kFloat32, true, true, true, true);
  AttentionParams masked = p;
  masked.mask = full;
  Buffer mask = UploadedBuffer(context, std::vector<uint8_t>(MaskBytes(masked)));
  Buffer dbias = UploadedBuffer(context, std::vector<uint8_t>(MaskElements(masked) * 4));
  const BufferView short_mask{mask.handle(), 0, MaskBytes(masked) - 4};

  struct Bad {
    const char* what;
    AttentionMask mask;
    BufferView mask_view, dbias_view;
  };
  const Bad bad_calls[] = {
      {"a mask without a buffer", full, {}, {}},
      {"a mask buffer one element short", full, short_mask, {}},
      {"a mask buffer without params.mask", {}, mask.view(), {}},
      {"a dbias buffer without a mask", {}, {}, dbias.view()},
      {"a dbias buffer with a boolean mask", Mask(MaskType::kBool, true, true, true, true), mask.view(), dbias.view()},
      {"a dbias buffer one float short", full, mask.view(), BufferView{dbias.handle(), 0, MaskElements(masked) * 4 - 4}},
      {"a dbias buffer that overlaps the mask", full, mask.view(), mask.view()},
  };
  for (const Bad& call : bad_calls) {
    INFO(call.what);
    AttentionParams bad = p;
    bad.mask = call.mask;
    if (call.dbias_view.empty()) {  // the forward has no dbias
      ForwardBuffers f{q.view(), k.view(), v.view(), o.view(), lse.view()};
      f.mask = call.mask_view;
      const Status forward = context.Forward(bad, f);
      INFO(forward.ToString());
      CHECK(forward.code() == ErrorCode::kInvalidArgument);
    }
    BackwardBuffers b{q.view(), k.view(), v.view(), o.view(), lse.view(), d_o.view(), dq.view(), dk.view(), dv.view()};
    b.mask = call.mask_view;
    b.dbias = call.dbias_view;
    const Status backward = context.Backward(bad, b);
    INFO(backward.ToString());
    CHECK(backward.code() == ErrorCode::kInvalidArgument);
    CHECK(!backward.message().empty());
  }
  std::vector<uint8_t> after(marked.size());
  REQUIRE(context.Download(o.view(), after.data(), after.size()).ok());
  CHECK(after == marked);
  REQUIRE(context.Download(dq.view(), after.data(), after.size()).ok());
  CHECK(after == marked);
  // A call with nothing to compute (no query rows, no keys) refuses stray views the same way.
  AttentionParams empty = MakeParams({2, 4, 2, 0, 0, 16}, DataType::kFloat32, false);
  ForwardBuffers empty_forward{q.view(), k.view(), v.view(), o.view(), lse.view()};
  CHECK(context.Forward(empty, empty_forward).ok());
  empty_forward.mask = mask.view();
  CHECK(context.Forward(empty, empty_forward).code() == ErrorCode::kInvalidArgument);
  BackwardBuffers empty_backward{q.view(), k.view(), v.view(), o.view(), lse.view(), d_o.view(), dq.view(), dk.view(), dv.view()};
  CHECK(context.Backward(empty, empty_backward).ok());
  for (const auto& [what, stray] : {std::pair{"mask", &BackwardBuffers::mask}, {"dbias", &BackwardBuffers::dbias},
                                    {"dsinks", &BackwardBuffers::dsinks}}) {
    INFO("a stray " << what << " view on an empty call");
    BackwardBuffers b = empty_backward;
    b.*stray = mask.view();
    CHECK(context.Backward(empty, b).code() == ErrorCode::kInvalidArgument);
  }
  empty.mask = Mask(MaskType::kBool, true, true, true, true);
  empty_backward.dbias = dbias.view();
  CHECK(context.Backward(empty, empty_backward).code() == ErrorCode::kInvalidArgument);  // no gradient
  // With the buffers it needs, the same call runs.
  ForwardBuffers f{q.view(), k.view(), v.view(), o.view(), lse.view()};
  f.mask = mask.view();
  CHECK(context.Forward(masked, f).ok());
  // The mask's block summary lives in the workspace: recorded without one, the call is refused.
  auto workspace = context.ForwardWorkspaceBytes(masked);
  REQUIRE(workspace.ok());
  CHECK(*workspace > 0);
  const Status unrecorded = context.RecordForward(reinterpret_cast<VkCommandBuffer>(uintptr_t(1)), masked, f);
  CHECK(unrecorded.code() == ErrorCode::kInvalidArgument);
  CHECK(unrecorded.message().find("block summary") != std::string::npos);
  RequireNoValidationMessages();
}
