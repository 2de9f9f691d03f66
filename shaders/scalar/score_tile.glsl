// The scores a register-tiled gradient kernel computes in the first half of a step and sums in the
// second (dK/dV: P^T and dS^T; dQ: dS), in shared memory. Each invocation owns ROWS_PER_THREAD
// consecutive owned rows (dK/dV's keys, dQ's query rows); the sums read, for one streamed row at a
// time, the invocation's owned rows.
// - ROWS_PER_THREAD a multiple of 4 (the 48 KB tiles): a row per streamed row, 4 owned rows a vec4,
//   so that those reads are ROWS_PER_THREAD / 4 vec4 loads instead of a float load per owned row
//   (docs/tuning-log.md, "where the scalar backward's time goes").
// - else: a row per owned row, a float each, at a stride one more than the streamed rows.
// The sizes are those of common/shared_memory_sizes.h, which the engine adds up too.
//
// Include after the kernel's ROWS_PER_THREAD.
#ifndef VKFLASH_SCORE_TILE_GLSL
#define VKFLASH_SCORE_TILE_GLSL

const uint SCORES_BY_OWNED_ROW = VKF_TILED_SCORES_BY_OWNED_ROW(ROWS_PER_THREAD);

// Defines the tile `name` of OWNED x STREAMED scores and its two accessors:
//   void name_store(uint first, uint c, float v[ROWS_PER_THREAD]): v[r] as the score of owned row
//     first + r and streamed row c;
//   void name_load(uint first, uint c, out float v[ROWS_PER_THREAD]): those scores back.
// `first` is an invocation's first owned row (a multiple of ROWS_PER_THREAD).
#define VKF_DEFINE_SCORE_TILE(name, OWNED, STREAMED)                                                          \
  const uint name##_STRIDE = VKF_TILED_SCORE_STRIDE(STREAMED);                                                \
  const uint name##_ROW_VEC4S = VKF_TILED_SCORE_ROW_VEC4S(OWNED);                                             \
  shared float name##_floats[VKF_SMEM_TILED_SCORE_FLOATS(OWNED, name##_STRIDE, SCORES_BY_OWNED_ROW)];         \
  shared vec4 name##_vec4s[VKF_SMEM_TILED_SCORE_VEC4S(STREAMED, name##_ROW_VEC4S, SCORES_BY_OWNED_ROW)];      \
  void name##_store(uint first, uint c, float v[ROWS_PER_THREAD]) {                                           \
    if (SCORES_BY_OWNED_ROW == 1) {                                                                           \
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) name##_floats[(first + r) * name##_STRIDE + c] = v[r]; \
    } else {                                                                                                  \
      [[unroll]] for (uint k = 0; k < ROWS_PER_THREAD / 4; ++k)                                               \
        name##_vec4s[c * name##_ROW_VEC4S + first / 4 + k] = vec4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]); \
    }                                                                                                         \
  }                                                                                                           \
  void name##_load(uint first, uint c, out float v[ROWS_PER_THREAD]) {                                        \
    if (SCORES_BY_OWNED_ROW == 1) {                                                                           \
      [[unroll]] for (uint r = 0; r < ROWS_PER_THREAD; ++r) v[r] = name##_floats[(first + r) * name##_STRIDE + c]; \
    } else {                                                                                                  \
      [[unroll]] for (uint k = 0; k < ROWS_PER_THREAD / 4; ++k) {                                             \
        const vec4 x = name##_vec4s[c * name##_ROW_VEC4S + first / 4 + k];                                    \
        v[4 * k] = x.x;                                                                                       \
        v[4 * k + 1] = x.y;                                                                                   \
        v[4 * k + 2] = x.z;                                                                                   \
        v[4 * k + 3] = x.w;                                                                                   \
      }                                                                                                       \
    }                                                                                                         \
  }

#endif
