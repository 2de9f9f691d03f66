// Mask elements for tests: where element (b, h, i, j) of a call's mask lies, and random masks that
// block pairs and close whole 16 x 16 blocks.
#pragma once

#include <vkflash/vkflash.hpp>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace vkflash::testing {

// The [B, Hq, Nq, Nk] a mask broadcasts to, derived here from the sequences (docs/design.md): Nq
// and Nk are the shape's, or with cu_seqlens_q / cu_seqlens_k the longest sequence's rows in Q /
// in K and V (the offsets' largest difference, whatever kv_lengths fills of them). Tests REQUIRE
// the library's MaskBroadcastShape to agree.
std::array<uint32_t, 4> ExpectedMaskShape(const AttentionParams& params);

// Element (b, h, i, j) of params.mask in that broadcast, C order over the dimensions it has.
uint64_t BroadcastMaskIndex(const AttentionParams& params, uint64_t b, uint64_t h, uint64_t i, uint64_t j);

// Random mask elements as BroadcastMaskIndex lays them out: per mask matrix (batch entry and head
// it has), each 16 x 16 block closed whole with probability `closed_blocks`, each other pair
// blocked with probability `blocked_pairs`; an additive mask's other elements Normal(0,
// bias_sigma) (float16-rounded for a float16 mask), -inf where blocked; a boolean one 0 where
// blocked, else 1.
std::vector<float> BlockSparseMaskValues(const AttentionParams& params, std::mt19937& rng, float closed_blocks,
                                         float blocked_pairs, float bias_sigma);

}  // namespace vkflash::testing
