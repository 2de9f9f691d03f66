// A key a query row cannot see must have no effect on that row, and the row none on the key's
// gradients, whatever values they hold. The scalar kernels skip masked pairs outright. The tensor-
// core kernels cannot: a matrix product multiplies every row of an operand by every column, and a
// masked pair's P = 0 (or dS = 0) times an inf or NaN operand is NaN. So in tiles that cross the
// mask, the tensor-core kernels look at the staged operand rows of the products (V in the forward;
// Q and dO in dK/dV; K in dQ); where one holds a non-finite float16 (rare, and cheap to notice while
// staging), the workgroup zeroes those values in shared memory before the products, and adds back,
// for the pairs that are visible, the infinities and NaNs they would have contributed:
//   forward O(i, d) += V(j, d)   dK/dV dV(j, d) += dO(i, d)   for visible (i, j) with a non-finite value
// (P > 0 there, so P x inf is inf: only the non-finite values decide the result). dK and dQ need no
// such term: a row whose Q or a key whose K is non-finite has non-finite scores, so its LSE (or
// delta) is NaN and its dS is NaN already. Shared flags record the step at which a tile held one.
#ifndef VKFLASH_NONFINITE_GLSL
#define VKFLASH_NONFINITE_GLSL

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

// Statement: `found` becomes true if any of `words[0 .. count)` holds a non-finite float16.
#define VKF_ANY_NONFINITE(words, count, found)                                            \
  [[unroll]] for (uint nf_j_ = 0; nf_j_ < (count); ++nf_j_) found = found || half8_nonfinite(words[nf_j_]);

// Statement: zeroes the non-finite float16 values of tile rows [row0, row0 + rows) of `tile` (a
// shared uvec4 array with rows of ROW_U4 words, TILE_STRIDE apart), spread over the workgroup.
#define VKF_ZERO_NONFINITE_ROWS(tile, row0, rows)                                           \
  for (uint nf_i_ = gl_LocalInvocationIndex; nf_i_ < (rows) * ROW_U4; nf_i_ += WORKGROUP_SIZE) { \
    const uint nf_at_ = ((row0) + nf_i_ / ROW_U4) * TILE_STRIDE + nf_i_ % ROW_U4;            \
    tile[nf_at_] = half8_zero_nonfinite(tile[nf_at_]);                                       \
  }

// The float16 at (row, column) of such a tile, as float.
#define VKF_TILE_HALF(tile, row, column) half8_at(tile[(row) * TILE_STRIDE + (column) / 8], (column) % 8)

#endif
