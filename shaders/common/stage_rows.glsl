// Staging of row tiles through shared memory, shared by the tensor-core kernels of both scopes.
// Needs ROW_U4 (uvec4 words per HEAD_DIM row of float16), TILE_STRIDE (words per shared row:
// ROW_U4 + 1, an odd count so that 8 rows of one matrix load hit 8 different banks) and
// WORKGROUP_SIZE.
#ifndef VKFLASH_STAGE_ROWS_GLSL
#define VKFLASH_STAGE_ROWS_GLSL

// Copies `rows` rows of two tensors, `buffer_a` and `buffer_b` (uvec4 arrays; row r of a starts at
// word a_base + r * a_stride, of b at b_base + r * b_stride), into the shared array `tile`, in two
// halves:
// `load_fn` reads this invocation's words of both tensors into registers and can run before the
// barrier that waits for the previous step's matrix loads, so that its memory latency overlaps
// that wait (the compiler may still issue the reads after the barrier: the H100 driver's does,
// tools/lab/sass_loop.py); `store_fn` writes them to the shared array after it. Every invocation
// of the workgroup takes part; the caller places the barriers. `words` is VKF_STAGE_WORDS(rows),
// declared by the caller as a constant (the arrays' size): e.g.
//   const uint KV_WORDS = VKF_STAGE_WORDS(BLOCK_KV);
//   VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_kv, store_kv, kv_tiles, k_u4, v_u4, BLOCK_KV, KV_WORDS)
//   ... uvec4 k_words[KV_WORDS], v_words[KV_WORDS];
//   load_kv(k_words, v_words, k_base, k_stride, v_base, v_stride, valid);
//   barrier(); store_kv(k_words, v_words); barrier();
// Rows go to tile rows [0, rows) (buffer_a) and [rows, 2 rows) (buffer_b); rows >= valid_rows
// become 0. Both tensors in one loop, so their loads are in flight together (built from two
// VKF_DEFINE_STAGE_ROWS_SPLIT_AT loops instead, the coopmat2 backward ran slower: docs/tuning-log.md,
// "the staging macros").
// VKF_DEFINE_STAGE_ROW_PAIR_SPLIT_AT does the same from tile row `first_row` on.
#define VKF_STAGE_WORDS(rows) (((rows) * ROW_U4 + WORKGROUP_SIZE - 1) / WORKGROUP_SIZE)
#define VKF_DEFINE_STAGE_ROW_PAIR_SPLIT(load_fn, store_fn, tile, buffer_a, buffer_b, rows, words) \
  VKF_DEFINE_STAGE_ROW_PAIR_SPLIT_AT(load_fn, store_fn, tile, 0, buffer_a, buffer_b, rows, words)
#define VKF_DEFINE_STAGE_ROW_PAIR_SPLIT_AT(load_fn, store_fn, tile, first_row, buffer_a, buffer_b, rows, words) \
  void load_fn(out uvec4 a[words], out uvec4 b[words], uint a_base, uint a_stride, uint b_base, uint b_stride, \
               uint valid_rows) {                                                              \
    [[unroll]] for (uint j = 0; j < words; ++j) {                                              \
      const uint i = gl_LocalInvocationIndex + j * WORKGROUP_SIZE;                             \
      const uint r = i / ROW_U4, c = i % ROW_U4;                                               \
      const bool copied = i < (rows) * ROW_U4 && r < valid_rows;                               \
      a[j] = copied ? buffer_a[a_base + r * a_stride + c] : uvec4(0);                          \
      b[j] = copied ? buffer_b[b_base + r * b_stride + c] : uvec4(0);                          \
    }                                                                                          \
  }                                                                                            \
  void store_fn(const uvec4 a[words], const uvec4 b[words]) {                                  \
    [[unroll]] for (uint j = 0; j < words; ++j) {                                              \
      const uint i = gl_LocalInvocationIndex + j * WORKGROUP_SIZE;                             \
      const uint r = i / ROW_U4, c4 = i % ROW_U4;                                              \
      if (i < (rows) * ROW_U4) {                                                               \
        tile[((first_row) + r) * TILE_STRIDE + c4] = a[j];                                     \
        tile[((first_row) + (rows) + r) * TILE_STRIDE + c4] = b[j];                            \
      }                                                                                        \
    }                                                                                          \
  }

// One tensor of `row_u4` words per row (any width, not only HEAD_DIM's), split the same way:
// `rows` rows into `tile` from tile row `first_row` on, `tile_stride` words apart; rows >=
// valid_rows become 0. `words` is VKF_STAGE_WORDS_OF(rows, row_u4).
#define VKF_STAGE_WORDS_OF(rows, row_u4) (((rows) * (row_u4) + WORKGROUP_SIZE - 1) / WORKGROUP_SIZE)
#define VKF_DEFINE_STAGE_ROWS_SPLIT_AT(load_fn, store_fn, tile, first_row, tile_stride, buffer, rows, row_u4, words) \
  void load_fn(out uvec4 a[words], uint base, uint stride, uint valid_rows) {                  \
    [[unroll]] for (uint j = 0; j < words; ++j) {                                              \
      const uint i = gl_LocalInvocationIndex + j * WORKGROUP_SIZE;                             \
      const uint r = i / (row_u4), c = i % (row_u4);                                           \
      a[j] = i < (rows) * (row_u4) && r < valid_rows ? buffer[base + r * stride + c] : uvec4(0); \
    }                                                                                          \
  }                                                                                            \
  void store_fn(const uvec4 a[words]) {                                                        \
    [[unroll]] for (uint j = 0; j < words; ++j) {                                              \
      const uint i = gl_LocalInvocationIndex + j * WORKGROUP_SIZE;                             \
      if (i < (rows) * (row_u4)) tile[((first_row) + i / (row_u4)) * (tile_stride) + i % (row_u4)] = a[j]; \
    }                                                                                          \
  }

// The way out: defines `void fn(uint base, uint stride, uint valid_rows)`, which copies rows [0,
// rows) of the shared array `tile` (ROW_U4 words at row stride TILE_STRIDE, as staged above) to
// `buffer` (row r at word base + r * stride), leaving out rows >= valid_rows. Every invocation of
// the workgroup takes part; the caller places the barriers.
#define VKF_DEFINE_UNSTAGE_ROWS(fn, tile, buffer, rows)                                          \
  void fn(uint base, uint stride, uint valid_rows) {                                             \
    for (uint i = gl_LocalInvocationIndex; i < (rows) * ROW_U4; i += WORKGROUP_SIZE) {           \
      const uint r = i / ROW_U4, c = i % ROW_U4;                                                 \
      if (r < valid_rows) buffer[base + r * stride + c] = tile[r * TILE_STRIDE + c];             \
    }                                                                                            \
  }

// Both halves back to back, where nothing is to overlap the copy: defines
// `void fn(uint a_base, uint a_stride, uint b_base, uint b_stride, uint valid_rows)` from the two
// functions of VKF_DEFINE_STAGE_ROW_PAIR_SPLIT.
#define VKF_DEFINE_STAGE_ROW_PAIR(fn, load_fn, store_fn, words)                                 \
  void fn(uint a_base, uint a_stride, uint b_base, uint b_stride, uint valid_rows) {            \
    uvec4 a[words], b[words];                                                                   \
    load_fn(a, b, a_base, a_stride, b_base, b_stride, valid_rows);                              \
    store_fn(a, b);                                                                             \
  }

#endif
