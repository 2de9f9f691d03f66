// Masks over batches whose sequences differ (docs/design.md, "Sequences"): a KV cache filled to
// different lengths (the mask's Nk is the capacity) and ragged batches (its Nq and Nk are the
// longest sequence's, and sequence b's own row i and key j are element [b, h, i, j]). Each
// sequence against the float64 reference of that sequence alone with its part of the mask,
// forward and backward; the bias's gradient summed over the sequences as the mask broadcasts, and
// exactly 0 where no sequence has the pair. The masks close whole 16 x 16 blocks too, so the
// kernels' tile skipping runs with sequences. K and V rows past a sequence's keys hold NaN.
#include <catch2/catch.hpp>

#include <random>

#include "support/attention_case.h"
#include "support/mask_values.h"
#include "support/sequence_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

// The call checked sequence by sequence (support/sequence_case.h), its mask with about a fifth of
// the pairs blocked and about a third of the 16 x 16 blocks closed.
void CheckMaskedSequences(Context& context, const AttentionParams& p, uint32_t seed, bool backward) {
  std::mt19937 rng(seed + 4);
  ScoreValues values;
  values.mask = BlockSparseMaskValues(p, rng, 0.35f, 0.2f, 1.0f);
  CheckSequencesAgainstReference(context, p, values, seed, backward);
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
