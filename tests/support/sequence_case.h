// One call over a batch whose sequences differ (docs/design.md, "Sequences": a KV cache's lengths,
// ragged queries or keys), checked sequence by sequence against the float64 reference of that
// sequence alone.
#pragma once

#include <vkflash/vkflash.hpp>

#include <cstdint>
#include <vector>

#include "support/attention_case.h"

namespace vkflash::testing {

// Runs `params` (which has kv_lengths or cu_seqlens) forward, and backward where `backward`, with
// random inputs from `seed` (NaN in the K and V rows no sequence attends to) and `values` (the
// mask's elements as support/mask_values.h's BroadcastMaskIndex lays them out, the slopes, the
// sinks). Checks each sequence's O, LSE, dQ, dK and dV against the reference of that sequence
// alone with its slopes and its part of the mask; rows that see no key exactly O = 0 and LSE -inf
// or the sink; dK and dV exactly 0 past each sequence's length (and for a sequence without
// queries); dsinks and dbias summed over the sequences (DsinksError, DbiasError), dbias exactly 0
// where no sequence has the pair; the mask's broadcast shape as derived from the sequences. No
// validation message.
void CheckSequencesAgainstReference(Context& context, const AttentionParams& params, const ScoreValues& values,
                                    uint32_t seed, bool backward);

}  // namespace vkflash::testing
