// The register-tiled scalar kernels' shared-memory words and the arithmetic on them. A word is 16
// bytes of one row of a tile: the unit of every shared-memory load.
//
// VKF_HALF_WORDS = 1: a word is a uvec4 of 8 halves, as a float16 tensor stores them (half the
// shared memory of floats), widened to floats where read (word_to_f32). The forward keeps halves
// with float16 products only (its default; its _kf32 variants stage K as floats all the same); the
// backward kernels whenever the tensors are float16.
// VKF_HALF_WORDS = 0: a word is a vec4 of 4 floats (float16 tensors are converted when staged).
//
// VKF_FLOAT16_MATH = 1 (the forward, float16 tensors on a device with shaderFloat16): S = Q K^T is computed in
// float32 from the widened words (its absolute error is what the softmax sees). O += P V multiplies
// in float16, two products per instruction, and sums FLOAT16_TERMS keys per half of a f16vec2
// before adding that partial sum to O's float32 accumulator (a relative error, which O's tolerance
// absorbs); a row that sees a V value large enough to overflow such a partial (or inf or NaN)
// takes float32 products instead.
// VKF_FLOAT16_MATH = 0: every product and sum is float32.
//
// Include after scalar/tensor_io.glsl (storage_t).
#ifndef VKFLASH_REGISTER_TILE_GLSL
#define VKFLASH_REGISTER_TILE_GLSL

#include "common/fma_dot.glsl"

#ifndef VKF_HALF_WORDS
#define VKF_HALF_WORDS VKF_FLOAT16_MATH
#endif

#if VKF_HALF_WORDS
#define word_t uvec4
const uint WORD_COLS = 8;
#else
#define word_t vec4
const uint WORD_COLS = 4;
#endif
// The vec4s a word widens to.
const uint WORD_VEC4S = WORD_COLS / 4;

#if VKF_FLOAT16_MATH
#define p_t float16_t
// Keys per float16 partial sum of P V.
const uint FLOAT16_TERMS = VKF_TILED_FORWARD_FLOAT16_TERMS;
#else
#define p_t float
#endif

// The tensors in global memory, as 16-byte words: 8 halves or 4 floats (the engine picks these
// kernels only for views at 16-byte offsets, strides of whole words and a head dim of 8k).
#if VKF_STORAGE_F16
#define global_word_t uvec4
const uint GLOBAL_COLS = 8;
#else
#define global_word_t vec4
const uint GLOBAL_COLS = 4;
#endif
#define VKF_TENSOR_WORDS_IN(binding_index, name) \
  layout(std430, set = 0, binding = binding_index) readonly buffer name##_block { global_word_t name[]; }

// One global word as floats: columns 0-3 and 4-7 (a float32 word has only the first four).
void unpack_global(global_word_t w, out vec4 lo, out vec4 hi) {
#if VKF_STORAGE_F16
  lo = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
  hi = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
#else
  lo = w;
  hi = vec4(0.0);
#endif
}

// --- Staging: a global word into shared words ---

// The shared words one global word becomes (a float16 word read with float32 math: two vec4).
const uint WORDS_PER_GLOBAL = GLOBAL_COLS / WORD_COLS;

#if VKF_HALF_WORDS && !VKF_STORAGE_F16
#error "words of halves are staged from float16 tensors only"
#endif
#if VKF_FLOAT16_MATH && !VKF_HALF_WORDS
#error "float16 products read words of halves"
#endif

#if VKF_FLOAT16_MATH
// The largest |element| of a word, as float16 bits without the sign: they order as the magnitudes
// do, with inf and NaN above every finite value.
uint word_abs_max_bits(word_t w) {
  const uvec4 a = w & 0x7fff7fffu;
  const uvec4 m = max(a & 0xffffu, a >> 16);
  return max(max(m.x, m.y), max(m.z, m.w));
}
// float16 2048: below it, 16 keys' P V (P <= 1, at most 32768) cannot overflow a float16 partial sum
// (VKF_TILED_FORWARD_FLOAT16_TERMS keys; scalar_backend.cc checks the pair).
const uint FLOAT16_PARTIAL_SAFE_BITS = 0x6800u;
#endif

// Stores global word w at shared word `at` of `tile` as floats: one vec4, or two for a word of 8
// halves. (Arguments as VKF_STAGE_WORD's, whose words-of-floats form it is.)
#define VKF_STAGE_WORD_WIDENED(tile, at, w, bits, row_slot, GUARDED) \
  {                                                                  \
    vec4 lo, hi;                                                     \
    unpack_global(w, lo, hi);                                        \
    tile[at] = lo;                                                   \
    if (GLOBAL_COLS == 8) tile[at + 1] = hi;                         \
  }
// Stores global word w at shared word `at` of `tile` in the tile's words; GUARDED (the forward's V,
// with float16 products): also keeps the word's largest |value| in `bits`, and in
// v_abs_max_bits[row_slot] where it reaches FLOAT16_PARTIAL_SAFE_BITS (VKF_GUARD_WORD).
#if VKF_HALF_WORDS
#define VKF_STAGE_WORD(tile, at, w, bits, row_slot, GUARDED) \
  {                                                          \
    tile[at] = w;                                            \
    VKF_GUARD_WORD(w, bits, row_slot, GUARDED)               \
  }
#else
#define VKF_STAGE_WORD VKF_STAGE_WORD_WIDENED
#endif
#if VKF_FLOAT16_MATH
// The slot is raised only by a word that could overflow a float16 partial: it then holds 0 or the
// row's largest unsafe value, and its readers only compare it with FLOAT16_PARTIAL_SAFE_BITS. An
// atomic per word, 16 invocations to one slot at D = 128, cost 3.6% of the forward (docs/tuning-log.md).
#define VKF_GUARD_WORD(w, bits, row_slot, GUARDED)                                \
  if (GUARDED) {                                                                  \
    const uint word_bits = word_abs_max_bits(w);                                  \
    if (word_bits >= FLOAT16_PARTIAL_SAFE_BITS) {                                 \
      atomicMax(v_abs_max_bits[row_slot], word_bits, gl_ScopeWorkgroup, 0, 0);    \
    }                                                                             \
    bits = max(bits, word_bits);                                                  \
  }
#else
#define VKF_GUARD_WORD(w, bits, row_slot, GUARDED)
#endif
// Stagers read an invocation's words in batches (VKF_STAGE_BATCH_WORDS of one tensor,
// VKF_STAGE_PAIR_BATCH_WORDS of each of two: common/shader_interface.h): every read of a batch is
// issued before any of its stores, so that their latencies overlap. A loop that reads and stores one
// word per trip waits for each read in turn, as the driver does not unroll a loop whose trip count
// is a specialization constant; the batch is an unrolled loop to a literal bound.

// Row and word of an invocation's word j of a staged tile (j-th in steps of WORKGROUP_SIZE), and
// whether the tile of `rows` rows has it. Needs GLOBAL_ROW_WORDS (words of a tensor row) in scope.
#define VKF_STAGED_WORD(rows, j, i, r, g, has)                    \
  const uint i = gl_LocalInvocationIndex + (j) * WORKGROUP_SIZE;  \
  const uint r = i / GLOBAL_ROW_WORDS, g = i % GLOBAL_ROW_WORDS;  \
  const bool has = i < (rows) * GLOBAL_ROW_WORDS;
// Global word g of row `first + r` of `data`, whose row n starts at global word (base + n * stride)
// / GLOBAL_COLS; zeros for rows at or past `count` and where `has` is false.
#define VKF_READ_WORD(data, base, stride, r, g, has) \
  (has && first + r < count ? data[(base + (first + r) * stride) / GLOBAL_COLS + g] : global_word_t(0))

// Defines `void fn(uint base, uint stride, uint first, uint count)`: copies rows [first, first +
// ROWS) of `data` into `tile` at row stride STRIDE, in the tile's words; rows at or past `count`
// become zeros. Needs STRIDE and GLOBAL_ROW_WORDS in scope.
#define VKF_DEFINE_STAGER(fn, tile, data, ROWS)                                                  \
  void fn(uint base, uint stride, uint first, uint count) {                                      \
    uint bits = 0; /* unused: no guard */                                                        \
    for (uint j0 = 0; j0 * WORKGROUP_SIZE < ROWS * GLOBAL_ROW_WORDS; j0 += VKF_STAGE_BATCH_WORDS) { \
      global_word_t words[VKF_STAGE_BATCH_WORDS];                                                \
      [[unroll]] for (uint j = 0; j < VKF_STAGE_BATCH_WORDS; ++j) {                              \
        VKF_STAGED_WORD(ROWS, j0 + j, i, r, g, has)                                              \
        words[j] = VKF_READ_WORD(data, base, stride, r, g, has);                                 \
      }                                                                                          \
      [[unroll]] for (uint j = 0; j < VKF_STAGE_BATCH_WORDS; ++j) {                              \
        VKF_STAGED_WORD(ROWS, j0 + j, i, r, g, has)                                              \
        if (has) VKF_STAGE_WORD(tile, r * STRIDE + g * WORDS_PER_GLOBAL, words[j], bits, r, false) \
      }                                                                                          \
    }                                                                                            \
  }

// Defines `uint fn(uint a_base, uint a_stride, uint b_base, uint b_stride, uint first, uint
// count)`: rows [first, first + ROWS) of two tensors at once, their reads in flight together:
// `data_a` into `tile_a` through STORE_A (VKF_STAGE_WORD, or VKF_STAGE_WORD_WIDENED for a tile of
// floats) at row stride A_STRIDE, A_WORDS shared words per global word; `data_b` into `tile_b` in
// the tile's words at row stride STRIDE. Rows at or past `count` become zeros. GUARDED_B (the
// forward's V, with float16 products): also keeps each row's largest |value| (word_abs_max_bits)
// in v_abs_max_bits[row] where it reaches FLOAT16_PARTIAL_SAFE_BITS (else the slot stays 0), and
// returns the largest this invocation staged; else returns 0. Needs
// STRIDE and GLOBAL_ROW_WORDS in scope, and v_abs_max_bits where GUARDED_B.
#define VKF_DEFINE_PAIR_STAGER(fn, tile_a, data_a, STORE_A, A_STRIDE, A_WORDS, tile_b, data_b, GUARDED_B, ROWS) \
  uint fn(uint a_base, uint a_stride, uint b_base, uint b_stride, uint first, uint count) {                     \
    uint bits = 0;                                                                                              \
    for (uint j0 = 0; j0 * WORKGROUP_SIZE < ROWS * GLOBAL_ROW_WORDS; j0 += VKF_STAGE_PAIR_BATCH_WORDS) {       \
      global_word_t words_a[VKF_STAGE_PAIR_BATCH_WORDS], words_b[VKF_STAGE_PAIR_BATCH_WORDS];                   \
      [[unroll]] for (uint j = 0; j < VKF_STAGE_PAIR_BATCH_WORDS; ++j) {                                        \
        VKF_STAGED_WORD(ROWS, j0 + j, i, r, g, has)                                                             \
        words_a[j] = VKF_READ_WORD(data_a, a_base, a_stride, r, g, has);                                        \
        words_b[j] = VKF_READ_WORD(data_b, b_base, b_stride, r, g, has);                                        \
      }                                                                                                         \
      [[unroll]] for (uint j = 0; j < VKF_STAGE_PAIR_BATCH_WORDS; ++j) {                                        \
        VKF_STAGED_WORD(ROWS, j0 + j, i, r, g, has)                                                             \
        if (has) {                                                                                              \
          STORE_A(tile_a, r * A_STRIDE + g * A_WORDS, words_a[j], bits, r, false)                               \
          VKF_STAGE_WORD(tile_b, r * STRIDE + g * WORDS_PER_GLOBAL, words_b[j], bits, r, GUARDED_B)             \
        }                                                                                                       \
      }                                                                                                         \
    }                                                                                                           \
    return bits;                                                                                                \
  }

// --- Products ---

// The word as floats: x[0] columns 0-3, x[1] (words of halves) 4-7.
void word_to_f32(word_t w, out vec4 x[WORD_VEC4S]) {
#if VKF_FLOAT16_MATH
  x[0] = vec4(vec2(unpackFloat2x16(w.x)), vec2(unpackFloat2x16(w.y)));
  x[1] = vec4(vec2(unpackFloat2x16(w.z)), vec2(unpackFloat2x16(w.w)));
#elif VKF_HALF_WORDS
  x[0] = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
  x[1] = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
#else
  x[0] = w;
#endif
}

// acc plus the float32 dot product of two words, as one chain of fused multiply-adds.
float word_dot_add(float acc, vec4 a[WORD_VEC4S], vec4 b[WORD_VEC4S]) {
  [[unroll]] for (uint h = 0; h < WORD_VEC4S; ++h) acc = fma_dot_add(acc, a[h], b[h]);
  return acc;
}

// A tensor row's vec4 column of accumulator i of an invocation that owns the row's words lane,
// lane + threads_per_row, ... (each WORD_VEC4S vec4 columns).
uint word_vec4_column(uint lane, uint threads_per_row, uint i) {
  return (lane + (i / WORD_VEC4S) * threads_per_row) * WORD_VEC4S + i % WORD_VEC4S;
}

#endif
