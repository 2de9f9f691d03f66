// A key a query row cannot see must have no effect on that row, and the row none on the key's
// gradients, whatever values they hold. The scalar kernels skip masked pairs outright. The tensor-
// core kernels cannot: a matrix product multiplies every row of an operand by every column, and a
// masked pair's P = 0 (or dS = 0) times an inf or NaN operand is NaN. So in tiles that an edge of the
// band crosses (common/attention_mask.glsl: a few per workgroup, at either end of a loop with a
// sliding window; past kv_len the staged rows are zeros already), they zero
// the non-finite float16 values of the streamed operands as they stage them (V in the forward; Q
// and dO in dK/dV; K in dQ) and raise a flag. Where it is up (rare), they restore what the visible
// pairs would have given, as the scalar kernels compute it:
//   - forward, after the loop: O(i, d) += V(j, d), and dK/dV: dV(j, d) += dO(i, d), for the
//     visible (i, j) of those tiles whose value is inf or NaN, read again from the buffers (P x inf
//     is inf for P > 0; a float32 P of exactly 0 would have given NaN instead: both non-finite);
//   - dQ, for a visible key whose K was zeroed, and dK/dV, for a visible row whose Q was zeroed:
//     dS = NaN (their score was inf or NaN, or -inf with P = 0: dS times the inf is NaN).
// Nothing of this runs in the loop over the other tiles, where it cost the H100 2-16%
// (docs/tuning-log.md, "non-finite operands in the tensor-core kernels").
#ifndef VKFLASH_NONFINITE_GLSL
#define VKFLASH_NONFINITE_GLSL

#define VKF_NAN uintBitsToFloat(0x7fc00000u)

// max() that keeps a NaN of either operand: GLSL's max() may drop it (NVIDIA's does), and a NaN
// score must reach its row's max, sum and O.
float max_keeping_nan(float a, float b) { return isnan(a) || a > b ? a : b; }

// True if either float16 of `bits` is inf or NaN (all exponent bits set).
bool half2_nonfinite(uint bits) { return (bits & 0x7c00u) == 0x7c00u || (bits & 0x7c000000u) == 0x7c000000u; }

bool half8_nonfinite(uvec4 w) {
  return half2_nonfinite(w.x) || half2_nonfinite(w.y) || half2_nonfinite(w.z) || half2_nonfinite(w.w);
}

// `bits` with its non-finite float16 halves replaced by +0.
uint half2_zero_nonfinite(uint bits) {
  if ((bits & 0x7c00u) == 0x7c00u) bits &= 0xffff0000u;
  if ((bits & 0x7c000000u) == 0x7c000000u) bits &= 0x0000ffffu;
  return bits;
}

uvec4 half8_zero_nonfinite(uvec4 w) {
  return uvec4(half2_zero_nonfinite(w.x), half2_zero_nonfinite(w.y), half2_zero_nonfinite(w.z),
               half2_zero_nonfinite(w.w));
}

// Column `c` (0..7) of a word of 8 float16 values, as float.
float half8_at(uvec4 w, uint c) { return unpackHalf2x16(w[c >> 1])[c & 1u]; }

// Statement: zeroes the non-finite float16 values of `words[0 .. count)` (staged words, in
// registers); `found` becomes true if there were any.
#define VKF_ZERO_NONFINITE(words, count, found)                           \
  [[unroll]] for (uint nf_j_ = 0; nf_j_ < (count); ++nf_j_) {            \
    found = found || half8_nonfinite(words[nf_j_]);                      \
    words[nf_j_] = half8_zero_nonfinite(words[nf_j_]);                   \
  }

// Statement: the same for staged words of rows (from a VKF_DEFINE_STAGE_ROW_PAIR_SPLIT load
// function; needs ROW_U4 and WORKGROUP_SIZE), recording `step` in `row_steps[r]` (shared uint) for
// every row r that had any.
#define VKF_ZERO_NONFINITE_ROWS(words, count, row_steps, step)                              \
  [[unroll]] for (uint nf_j_ = 0; nf_j_ < (count); ++nf_j_) {                               \
    if (half8_nonfinite(words[nf_j_])) {                                                     \
      atomicMax(row_steps[(gl_LocalInvocationIndex + nf_j_ * WORKGROUP_SIZE) / ROW_U4], step); \
      words[nf_j_] = half8_zero_nonfinite(words[nf_j_]);                                     \
    }                                                                                        \
  }

// Statement: the same test without zeroing: sets `row_flags[r]` (shared uint) to 1 for every row r
// with an inf or NaN among `words[0 .. count)`, and `any_flag` (shared uint) if there are any.
#define VKF_FLAG_NONFINITE_ROWS(words, count, row_flags, any_flag)                             \
  [[unroll]] for (uint nf_j_ = 0; nf_j_ < (count); ++nf_j_) {                                  \
    if (half8_nonfinite(words[nf_j_])) {                                                        \
      atomicOr(row_flags[(gl_LocalInvocationIndex + nf_j_ * WORKGROUP_SIZE) / ROW_U4], 1u);     \
      atomicOr(any_flag, 1u);                                                                   \
    }                                                                                           \
  }

// The tiles of a loop that an edge of the band crosses (tile_crosses_band), where the staging
// zeroed operands: a run that starts the loop (over key tiles: the left edge; over query tiles:
// the right edge) and a run that ends it (the other edge), either possibly empty. A crossed tile
// [begin, end) that starts inside the first run or where it ends extends it; any other starts the
// second. Noting a loop's tiles again (every head of a GQA group) changes nothing.
struct CrossedRuns {
  uint first_end;     // the first run is [loop start, first_end)
  uint second_begin;  // the second is [second_begin, loop end)
};

CrossedRuns no_crossed_tiles(uint loop_begin, uint loop_end) { return CrossedRuns(loop_begin, loop_end); }

void note_crossed_tile(inout CrossedRuns runs, uint begin, uint end) {
  if (begin <= runs.first_end) runs.first_end = max(runs.first_end, end);
  else runs.second_begin = min(runs.second_begin, begin);
}

// The part of [first, end) (a row's keys, a key's rows; first at or past the loop's start) in the
// crossed tiles, as two ranges [x, y) and [z, w), each empty where its end is not past its begin:
// the fix-ups read exactly those pairs again.
uvec4 crossed_part(CrossedRuns runs, uint first, uint end) {
  return uvec4(first, min(end, runs.first_end), max(first, max(runs.second_begin, runs.first_end)), end);
}

// The float16 element `index` of a buffer of uvec4 words, as float.
#define VKF_BUFFER_HALF(buffer_u4, index) half8_at(buffer_u4[(index) / 8], (index) % 8)

#endif
