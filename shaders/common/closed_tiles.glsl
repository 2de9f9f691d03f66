// The tiles a mask closes along a workgroup's loop (the key tiles of the forward's query rows, the
// query tiles of dK/dV's keys), found up front by the whole workgroup: one summary read per tile,
// all in parallel, into bits in shared memory. Read at every step instead (mask_closes_tile), or
// by a walk (mask_closes_keys), the summary kept each step's loads waiting for it
// (docs/tuning-log.md, "closed tiles found up front"). Tiles past the first
// 32 * VKF_SMEM_CLOSED_TILE_WORDS read the summary at their step.
// Include after common/score_mod.glsl, in a kernel of WORKGROUP_SIZE invocations.
#ifndef VKFLASH_CLOSED_TILES_GLSL
#define VKFLASH_CLOSED_TILES_GLSL

#include "common/shared_memory_sizes.h"

shared uint closed_tiles[VKF_SMEM_CLOSED_TILE_WORDS];  // bit t % 32 of word t / 32: tile closed_tiles_first + t
shared uint closed_tiles_first;                       // in tiles of the loop

// The mask's verdict on one tile: keys [begin, begin + size) of query rows [fixed_begin,
// fixed_end), or (!along_keys) query rows [begin, begin + size) of keys [fixed_begin, fixed_end);
// `len` is the loop side's length (kv_len or q_len).
bool mask_closes_loop_tile(const uint summary, const bool along_keys, const uint begin, const uint size, const uint len,
                           const uint fixed_begin, const uint fixed_end) {
  const uint end = min(begin + size, len);
  return along_keys ? mask_closes_tile(summary, fixed_begin, fixed_end, begin, end)
                    : mask_closes_tile(summary, begin, end, fixed_begin, fixed_end);
}

// Finds the closed tiles of a loop over tiles of `size` from `first` (a multiple of size) to `end`.
// In uniform control flow, with a mask; barriers before and after.
void find_closed_tiles(const uint summary, const bool along_keys, const uint first, const uint end, const uint size,
                       const uint len, const uint fixed_begin, const uint fixed_end) {
  barrier();  // the last loop's steps have read the bits
  for (uint w = gl_LocalInvocationIndex; w < VKF_SMEM_CLOSED_TILE_WORDS; w += WORKGROUP_SIZE) closed_tiles[w] = 0;
  if (gl_LocalInvocationIndex == 0) closed_tiles_first = first / size;
  barrier();
  for (uint t = gl_LocalInvocationIndex; t < 32 * VKF_SMEM_CLOSED_TILE_WORDS && first + t * size < end; t += WORKGROUP_SIZE) {
    if (mask_closes_loop_tile(summary, along_keys, first + t * size, size, len, fixed_begin, fixed_end)) {
      atomicOr(closed_tiles[t / 32], 1u << (t % 32));
    }
  }
  barrier();
}

// Whether the mask closes the loop's tile at `begin` (arguments as find_closed_tiles's).
bool tile_closed(const uint summary, const bool along_keys, const uint begin, const uint size, const uint len,
                 const uint fixed_begin, const uint fixed_end) {
  if (MASK == VKF_MASK_NONE) return false;
  const uint t = begin / size - closed_tiles_first;
  if (t < 32 * VKF_SMEM_CLOSED_TILE_WORDS) return (closed_tiles[t / 32] & (1u << (t % 32))) != 0;
  return mask_closes_loop_tile(summary, along_keys, begin, size, len, fixed_begin, fixed_end);
}

#endif
