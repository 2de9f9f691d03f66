// Non-finite inputs. A key a row cannot see has no effect on it, and the row none on the key's
// gradients, whatever they hold: outputs stay bit-identical to those of the same call with finite
// values there. Where they are seen, infinities and NaNs show in the results, and a row whose
// scores hold NaN gets NaN in O, LSE and dQ, never the zeros and -inf of a row that sees no key.
// Every kernel family runs these (float16 with head dims the tensor-core kernels take).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "reference_attention.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;
using vkflash::tools::KeyVisible;

namespace {

const float kPoisons[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Causal calls, both dtypes: the report's case (N = 100), Nq < Nk with two batches, Nq > Nk;
// several tiles of every kernel family; 8 query rows over 12 keys (the decode kernels, in float16).
// Then sliding windows, whose left edge crosses tiles too: causal with 40 keys (the edge mid-tile,
// every row tile crossing it) and a two-sided window.
std::vector<AttentionParams> Calls() {
  std::vector<AttentionParams> calls;
  for (const AttentionParams& p : FullSweep({{1, 2, 1, 100, 100, 64}, {2, 2, 2, 70, 130, 32}, {1, 1, 1, 130, 50, 128},
                                             {1, 2, 2, 8, 12, 64}})) {
    if (p.causal) calls.push_back(p);
  }
  for (const AttentionParams& p : FullSweep({{1, 2, 1, 100, 100, 64}, {1, 2, 2, 8, 12, 64}})) {
    AttentionParams windowed = p;
    windowed.window = p.causal ? AttentionWindow{40, -1} : AttentionWindow{9, 30};
    if (p.shape.q_len == 8) windowed.window = p.causal ? AttentionWindow{3, 0} : AttentionWindow{2, 1};
    calls.push_back(windowed);
  }
  return calls;
}

constexpr uint32_t kAllColumns = UINT32_MAX;

// Sets row `row` of every (batch, head) of a [B, H, N, D] tensor to `value`: all its columns, or
// only `column` (the tensor-core kernels zero and correct element by element).
void SetRow(std::vector<float>* tensor, const AttentionShape& s, uint32_t heads, uint32_t len, uint32_t row, float value,
            uint32_t column = kAllColumns) {
  for (uint32_t bh = 0; bh < s.batch * heads; ++bh)
    for (uint32_t d = 0; d < s.head_dim; ++d)
      if (column == kAllColumns || d == column) (*tensor)[(uint64_t(bh) * len + row) * s.head_dim + d] = value;
}

// Where a poison goes: in V (forward) or dO (backward), else in K or Q; and in which columns. One
// element alone only in V or dO: in K or Q it gives a score of +-inf or NaN by the sign of the
// other operand's element.
const std::pair<bool, uint32_t> kPlacements[] = {{true, kAllColumns}, {true, 5u}, {false, kAllColumns}};

// Whether column d of a row that sees the poison must show it.
bool Poisoned(uint32_t column, uint32_t d) { return column == kAllColumns || d == column; }

}  // namespace

TEST_CASE("a key a row cannot see has no effect on that row's O and LSE", "[nonfinite][forward]") {
  Context& context = SharedContext(Knobs::kDevice);
  for (const AttentionParams& p : Calls()) {
    const AttentionShape& s = p.shape;
    const uint32_t D = s.head_dim;
    const ForwardRun base = RunForwardCase(context, p, 3);
    // A key in the middle and the last one: each is masked for some rows of its diagonal tiles.
    for (uint32_t key : {s.kv_len / 2 + 1, s.kv_len - 1}) {
      for (float poison : kPoisons) {
        for (auto [in_v, column] : kPlacements) {
          INFO(Describe(p) << ", key " << key << (in_v ? " of V" : " of K") << " = " << poison
                           << (column == kAllColumns ? "" : " in column 5 only"));
          std::vector<float> k = base.k, v = base.v;
          SetRow(in_v ? &v : &k, s, s.kv_heads, s.kv_len, key, poison, column);
          const ForwardRun run = RunForwardWith(context, p, base.q, k, v);
          uint64_t checked = 0;
          for (uint32_t bh = 0; bh < s.batch * s.q_heads; ++bh) {
            for (uint32_t i = 0; i < s.q_len; ++i) {
              const uint64_t row = uint64_t(bh) * s.q_len + i;
              if (!KeyVisible(p, i, key)) {  // exactly as without the poison
                for (uint32_t d = 0; d < D; ++d) REQUIRE(SameBits(run.o[row * D + d], base.o[row * D + d]));
                REQUIRE(SameBits(run.lse[row], base.lse[row]));
                ++checked;
              } else if (in_v) {  // the poisoned columns of the row hold its mark; LSE does not see V
                for (uint32_t d = 0; d < D; ++d)
                  if (Poisoned(column, d)) REQUIRE_FALSE(std::isfinite(run.o[row * D + d]));
                REQUIRE(SameBits(run.lse[row], base.lse[row]));
              } else {  // an inf or NaN score: the row is NaN
                REQUIRE(std::isnan(run.lse[row]));
                for (uint32_t d = 0; d < D; ++d) REQUIRE(std::isnan(run.o[row * D + d]));
              }
            }
          }
          CHECK(checked > 0);
        }
      }
    }
    RequireNoValidationMessages();
  }
}

TEST_CASE("a row whose scores hold NaN gets NaN in O, LSE and dQ, not the values of an empty row", "[nonfinite]") {
  Context& context = SharedContext(Knobs::kDevice);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (bool causal : {false, true}) {
      AttentionParams p;
      p.shape = {1, 2, 1, 40, 40, 64};
      p.dtype = dtype;
      p.causal = causal;
      INFO(Describe(p));
      const AttentionShape& s = p.shape;
      const uint32_t D = s.head_dim, nan_row = 21;
      std::vector<float> q = RandomValues(s.q_elements(), dtype, 5);
      for (uint32_t d = 0; d < D; d += 7) q[nan_row * D + d] = std::numeric_limits<float>::quiet_NaN();  // head 0
      const BackwardRun base = RunBackwardCase(context, p, 5);  // the same inputs but finite
      const ForwardRun forward = RunForwardWith(context, p, q, base.k, base.v);
      const BackwardRun backward = RunBackwardWith(context, p, q, base.k, base.v, base.d_o);
      for (uint32_t row = 0; row < s.lse_elements(); ++row) {
        if (row == nan_row) {
          REQUIRE(std::isnan(forward.lse[row]));
          for (uint32_t d = 0; d < D; ++d) REQUIRE(std::isnan(forward.o[row * D + d]));
          for (uint32_t d = 0; d < D; ++d) REQUIRE(std::isnan(backward.dq[row * D + d]));
        } else {  // other rows are untouched
          REQUIRE(std::isfinite(forward.lse[row]));
          for (uint32_t d = 0; d < D; ++d) REQUIRE(SameBits(backward.dq[row * D + d], base.dq[row * D + d]));
        }
      }
      // The keys the NaN row sees get NaN gradients; the others keep theirs (causal: the row sees
      // keys 0..21, so keys 22.. of the kv head are those of other rows only).
      for (uint32_t j = 0; j < s.kv_len; ++j) {
        const bool seen = KeyVisible(p, nan_row, j);
        for (uint32_t d = 0; d < D; ++d) {
          if (seen) {
            REQUIRE(std::isnan(backward.dk[j * D + d]));
          } else {
            REQUIRE(SameBits(backward.dk[j * D + d], base.dk[j * D + d]));
            REQUIRE(SameBits(backward.dv[j * D + d], base.dv[j * D + d]));
          }
        }
      }
      RequireNoValidationMessages();
    }
  }
}

TEST_CASE("a row a key cannot reach has no effect on the key's gradients, whatever its dO and Q hold",
          "[nonfinite][backward]") {
  Context& context = SharedContext(Knobs::kDevice);
  for (const AttentionParams& p : Calls()) {
    const AttentionShape& s = p.shape;
    const uint32_t D = s.head_dim;
    const BackwardRun base = RunBackwardCase(context, p, 11);
    // Rows that see few keys: the first row that sees any, and one a few rows later.
    const uint32_t first = s.q_len > s.kv_len ? s.q_len - s.kv_len : 0;
    for (uint32_t row : {first, first + 3}) {
      for (float poison : kPoisons) {
        for (auto [in_do, column] : kPlacements) {
          INFO(Describe(p) << ", row " << row << (in_do ? " of dO" : " of Q") << " = " << poison
                           << (column == kAllColumns ? "" : " in column 5 only"));
          std::vector<float> q = base.q, d_o = base.d_o;
          SetRow(in_do ? &d_o : &q, s, s.q_heads, s.q_len, row, poison, column);
          const BackwardRun run = RunBackwardWith(context, p, q, base.k, base.v, d_o);
          uint64_t checked = 0;
          for (uint32_t kvh = 0; kvh < s.batch * s.kv_heads; ++kvh) {
            for (uint32_t j = 0; j < s.kv_len; ++j) {
              const uint64_t key = uint64_t(kvh) * s.kv_len + j;
              if (KeyVisible(p, row, j)) {  // the poisoned row reaches this key (its P x dO, or a NaN P): it shows
                for (uint32_t d = 0; d < D; ++d)
                  if (Poisoned(column, d)) REQUIRE_FALSE(std::isfinite(run.dv[key * D + d]));
                continue;
              }
              for (uint32_t d = 0; d < D; ++d) {
                REQUIRE(SameBits(run.dk[key * D + d], base.dk[key * D + d]));
                REQUIRE(SameBits(run.dv[key * D + d], base.dv[key * D + d]));
              }
              ++checked;
            }
          }
          CHECK(checked > 0);
          // Every other row's dQ depends on its own dO, LSE and delta only.
          for (uint32_t bh = 0; bh < s.batch * s.q_heads; ++bh) {
            for (uint32_t i = 0; i < s.q_len; ++i) {
              if (i == row) continue;
              const uint64_t r = uint64_t(bh) * s.q_len + i;
              for (uint32_t d = 0; d < D; ++d) REQUIRE(SameBits(run.dq[r * D + d], base.dq[r * D + d]));
            }
          }
        }
      }
    }
    // A masked key's K or V may hold anything: the dQ of rows that cannot see it is unchanged.
    const uint32_t key = s.kv_len - 1;
    for (float poison : kPoisons) {
      for (bool in_v : {true, false}) {
        INFO(Describe(p) << ", key " << key << (in_v ? " of V" : " of K") << " = " << poison);
        std::vector<float> k = base.k, v = base.v;
        SetRow(in_v ? &v : &k, s, s.kv_heads, s.kv_len, key, poison);
        const BackwardRun run = RunBackwardWith(context, p, base.q, k, v, base.d_o);
        for (uint32_t bh = 0; bh < s.batch * s.q_heads; ++bh) {
          for (uint32_t i = 0; i < s.q_len; ++i) {
            if (KeyVisible(p, i, key)) continue;
            const uint64_t r = uint64_t(bh) * s.q_len + i;
            for (uint32_t d = 0; d < D; ++d) REQUIRE(SameBits(run.dq[r * D + d], base.dq[r * D + d]));
          }
        }
      }
    }
    RequireNoValidationMessages();
  }
}

// With deterministic = false, dQ is summed with float atomics or from stored dS (where the device
// has those kernels): atomics' bits vary from run to run, so where the deterministic kernels
// promise the same bits, this checks finite values within the tolerance; dK and dV are still
// summed in a fixed order.
TEST_CASE("with atomic dQ or stored dS a poisoned row or key reaches only the gradients of what it is seen by",
          "[nonfinite][backward][atomic][stored_ds]") {
  ContextOptions stored_ds_options = ValidatedOptions();
  stored_ds_options.tile_overrides.nondeterministic_dq = "stored-ds";  // where the device has it
  auto stored_ds = Context::Create(stored_ds_options);
  REQUIRE(stored_ds.ok());
  // The contexts: deterministic = false as the device and shape choose (atomic dQ on these small
  // shapes), and stored dS asked for.
  for (Context* context_of_run : {&SharedContext(Knobs::kDevice), stored_ds->get()})
  for (AttentionParams p : Calls()) {
    Context& context = *context_of_run;
    p.deterministic = false;
    const AttentionShape& s = p.shape;
    const uint32_t D = s.head_dim;
    const BackwardRun base = RunBackwardCase(context, p, 31);
    // dQ of the rows `keep(i)` selects (every batch and head): finite, within the tolerance of the
    // reference gradients of the unpoisoned call.
    auto check_kept_rows = [&](const BackwardRun& run, const auto& keep) {
      double err = 0, norm = 0;
      for (uint32_t bh = 0; bh < s.batch * s.q_heads; ++bh) {
        for (uint32_t i = 0; i < s.q_len; ++i) {
          if (!keep(i)) continue;
          for (uint32_t d = 0; d < D; ++d) {
            const uint64_t e = (uint64_t(bh) * s.q_len + i) * D + d;
            REQUIRE(std::isfinite(run.dq[e]));
            err += (run.dq[e] - base.ref_dq[e]) * (run.dq[e] - base.ref_dq[e]);
            norm += base.ref_dq[e] * base.ref_dq[e];
          }
        }
      }
      CHECK(std::sqrt(err) <= BackwardTolerance(p.dtype) * std::sqrt(norm) + 1e-12);
    };
    auto choice = context.ChooseBackwardKernels(p);
    REQUIRE(choice.ok());
    const uint32_t row = s.q_len > s.kv_len ? s.q_len - s.kv_len : 0;  // the first row that sees a key
    for (float poison : kPoisons) {
      for (bool in_do : {true, false}) {
        INFO(Describe(p) << ", row " << row << (in_do ? " of dO" : " of Q") << " = " << poison);
        std::vector<float> q = base.q, d_o = base.d_o;
        SetRow(in_do ? &d_o : &q, s, s.q_heads, s.q_len, row, poison);
        const BackwardRun run = RunBackwardWith(context, p, q, base.k, base.v, d_o);
        check_kept_rows(run, [&](uint32_t i) { return i != row; });
        for (uint64_t kv_row = 0; kv_row < uint64_t(s.batch) * s.kv_heads * s.kv_len; ++kv_row) {
          if (KeyVisible(p, row, kv_row % s.kv_len)) continue;
          for (uint32_t d = 0; d < D; ++d) {
            REQUIRE(SameBits(run.dk[kv_row * D + d], base.dk[kv_row * D + d]));
            REQUIRE(SameBits(run.dv[kv_row * D + d], base.dv[kv_row * D + d]));
          }
        }
      }
      // The last key: seen only by the last rows, in tiles that cross kv_len; key 0: seen by every
      // row that sees any, mostly in tiles that cross no mask. One column of K gives a score of
      // -inf for some rows (P = 0, dS = 0: the tensor-core kernels set the pair's dS to NaN).
      const std::tuple<bool, uint32_t, uint32_t> placements[] = {
          {true, s.kv_len - 1, kAllColumns}, {false, s.kv_len - 1, kAllColumns}, {false, 0, kAllColumns},
          {false, 0, 5u}};
      for (auto [in_v, key, column] : placements) {
        INFO(Describe(p) << ", key " << key << (in_v ? " of V" : " of K") << " = " << poison
                         << (column == kAllColumns ? "" : " in column 5 only"));
        std::vector<float> k = base.k, v = base.v;
        SetRow(in_v ? &v : &k, s, s.kv_heads, s.kv_len, key, poison, column);
        const BackwardRun run = RunBackwardWith(context, p, base.q, k, v, base.d_o);
        check_kept_rows(run, [&](uint32_t i) { return !KeyVisible(p, i, key); });
        // A row that sees the key gets inf or NaN in its dQ: every column where the whole row is
        // poisoned or the tensor-core kernels multiply (contract), else at least the column's.
        const bool every_column = column == kAllColumns || choice->atomic_dq;
        for (uint32_t bh = 0; bh < s.batch * s.q_heads; ++bh)
          for (uint32_t i = 0; i < s.q_len; ++i)
            if (KeyVisible(p, i, key))
              for (uint32_t d = 0; d < D; ++d)
                if (every_column || d == column) REQUIRE_FALSE(std::isfinite(run.dq[(uint64_t(bh) * s.q_len + i) * D + d]));
      }
    }
    RequireNoValidationMessages();
  }
}

// The last key tile of a head is cut by kv_len, and the keys after it in memory are the next
// head's: what they hold has no effect, with or without the causal mask.
TEST_CASE("the keys of the next head in memory have no effect on a head's last, partial key tile",
          "[nonfinite][forward][backward]") {
  Context& context = SharedContext(Knobs::kDevice);
  // The last shape packs 2 heads x 2 rows (the decode kernels, in float16).
  for (const AttentionParams& p : FullSweep({{2, 2, 2, 70, 130, 32}, {1, 2, 2, 33, 100, 64}, {1, 4, 2, 2, 70, 64}})) {
    const AttentionShape& s = p.shape;
    const uint32_t D = s.head_dim;
    const BackwardRun base = RunBackwardCase(context, p, 17);
    const ForwardRun base_forward = RunForwardWith(context, p, base.q, base.k, base.v);
    for (float poison : kPoisons) {
      for (bool in_v : {true, false}) {
        INFO(Describe(p) << ", key 0 of the second K/V head" << (in_v ? " of V" : " of K") << " = " << poison);
        std::vector<float> k = base.k, v = base.v;
        std::vector<float>& target = in_v ? v : k;
        for (uint32_t d = 0; d < D; ++d) target[uint64_t(s.kv_len) * D + d] = poison;  // (batch 0, kv head 1, key 0)
        const ForwardRun forward = RunForwardWith(context, p, base.q, k, v);
        const BackwardRun backward = RunBackwardWith(context, p, base.q, k, v, base.d_o);
        // Query heads of kv head 0 in batch 0 (GQA: the first q_heads / kv_heads of them).
        const uint32_t rows = s.q_heads / s.kv_heads * s.q_len;
        for (uint64_t r = 0; r < rows; ++r) {
          REQUIRE(SameBits(forward.lse[r], base_forward.lse[r]));
          for (uint32_t d = 0; d < D; ++d) {
            REQUIRE(SameBits(forward.o[r * D + d], base_forward.o[r * D + d]));
            REQUIRE(SameBits(backward.dq[r * D + d], base.dq[r * D + d]));
          }
        }
        for (uint64_t key = 0; key < s.kv_len; ++key) {  // kv head 0 of batch 0
          for (uint32_t d = 0; d < D; ++d) {
            REQUIRE(SameBits(backward.dk[key * D + d], base.dk[key * D + d]));
            REQUIRE(SameBits(backward.dv[key * D + d], base.dv[key * D + d]));
          }
        }
      }
    }
    RequireNoValidationMessages();
  }
}

// On a driver with a loop budget the scalar kernels walk long loops in chunks that resume from
// state in the workspace: a NaN or inf met in one chunk must carry into the next as in one pass.
TEST_CASE("chunked passes carry infinities and NaNs as one pass does", "[nonfinite][long][knobs]") {
  Context& chunked = SharedContext(Knobs::kSmallLoopBudget);
  REQUIRE(chunked.device_info().shader_loop_budget == 4000);
  // a (chunked) and b (whole) hold the same bits, NaNs of any payload alike; a failure names the
  // first element that differs.
  const auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    size_t i = 0;
    while (i < a.size() && (SameBits(a[i], b[i]) || (std::isnan(a[i]) && std::isnan(b[i])))) ++i;
    std::ostringstream first_difference;
    first_difference << "first difference at element " << i << " of " << a.size();
    if (i < a.size()) {
      uint32_t a_bits, b_bits;
      std::memcpy(&a_bits, &a[i], 4);
      std::memcpy(&b_bits, &b[i], 4);
      first_difference << std::setprecision(9) << ": chunked " << a[i] << " (0x" << std::hex << a_bits << "), whole "
                       << b[i] << " (0x" << b_bits << ")";
    }
    INFO(first_difference.str());
    REQUIRE(i == a.size());
  };
  for (const bool causal : {false, true}) {
    AttentionParams p;
    p.shape = {1, 2, 1, 300, 700, 64};
    p.dtype = DataType::kFloat32;  // scalar kernels on every device
    p.causal = causal;
    INFO("kernels: " << KernelsDescription(chunked, p));
    auto workspace = chunked.ForwardWorkspaceBytes(p);
    REQUIRE(workspace.ok());
    REQUIRE(*workspace > 0);  // chunked indeed
    const std::unique_ptr<Context> same_tiles = SameTilesContext(chunked, p);
    Context& whole = *same_tiles;
    auto whole_workspace = whole.ForwardWorkspaceBytes(p);
    REQUIRE(whole_workspace.ok());
    REQUIRE(*whole_workspace == 0);  // one pass
    const BackwardRun base = RunBackwardCase(whole, p, 41);
    const AttentionShape& s = p.shape;
    // A key early in the first chunk and one late in the last; a query row in the middle.
    for (float poison : kPoisons) {
      INFO(Describe(p) << ", keys 10 and 650 of V, row 150 of Q = " << poison);
      std::vector<float> q = base.q, v = base.v;
      SetRow(&v, s, s.kv_heads, s.kv_len, 10, poison);
      SetRow(&v, s, s.kv_heads, s.kv_len, 650, poison, 5);
      SetRow(&q, s, s.q_heads, s.q_len, 150, poison);
      const ForwardRun a = RunForwardWith(chunked, p, q, base.k, v), b = RunForwardWith(whole, p, q, base.k, v);
      same(a.o, b.o);
      same(a.lse, b.lse);
      const BackwardRun c = RunBackwardWith(chunked, p, q, base.k, v, base.d_o);
      const BackwardRun d = RunBackwardWith(whole, p, q, base.k, v, base.d_o);
      same(c.dq, d.dq);
      same(c.dk, d.dk);
      same(c.dv, d.dv);
      // The poison shows: row 150's O is NaN wherever Q's row is NaN or inf.
      REQUIRE(std::isnan(a.lse[150]));
    }
  }
  RequireNoValidationMessages();
}
