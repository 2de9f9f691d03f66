// Staging of row tiles through shared memory, shared by the tensor-core kernels of both scopes.
// Needs ROW_U4 (uvec4 words per HEAD_DIM row of float16), TILE_STRIDE (words per shared row:
// ROW_U4 + 1, an odd count so that 8 rows of one matrix load hit 8 different banks) and
// WORKGROUP_SIZE.
#ifndef VKFLASH_STAGE_ROWS_GLSL
#define VKFLASH_STAGE_ROWS_GLSL

// Defines `void fn(uint tile_row, uint rows, uint src_row0, uint valid_rows)`: copies `rows` rows
// of two tensors with the same layout, `buffer_a` and `buffer_b` (uvec4 arrays; row r starts at
// word (src_row0 + r) * ROW_U4), into the shared array `tile`: buffer_a's from row tile_row on,
// buffer_b's from row tile_row + rows on. Rows >= valid_rows become 0. Both tensors in one loop,
// so their loads are in flight together. Every invocation of the workgroup takes part; the caller
// places the barriers.
#define VKF_DEFINE_STAGE_ROW_PAIR(fn, tile, buffer_a, buffer_b)                                  \
  void fn(uint tile_row, uint rows, uint src_row0, uint valid_rows) {                            \
    [[unroll]] for (uint i = gl_LocalInvocationIndex; i < rows * ROW_U4; i += WORKGROUP_SIZE) {  \
      const uint r = i / ROW_U4, c4 = i % ROW_U4, src = (src_row0 + r) * ROW_U4 + c4;            \
      tile[(tile_row + r) * TILE_STRIDE + c4] = r < valid_rows ? buffer_a[src] : uvec4(0);       \
      tile[(tile_row + rows + r) * TILE_STRIDE + c4] = r < valid_rows ? buffer_b[src] : uvec4(0); \
    }                                                                                            \
  }

#endif
