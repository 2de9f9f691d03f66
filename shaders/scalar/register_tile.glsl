// The register-tiled scalar kernels' shared-memory words and the arithmetic on them. A word is 16
// bytes of one row of a tile: the unit of every shared-memory load.
//
// VKF_FLOAT16_MATH = 1 (float16 tensors on a device with shaderFloat16): a word is a uvec4 of 8
// halves, as the tensor stores them (half the shared memory of floats). S = Q K^T is computed in
// float32 from the widened words (its absolute error is what the softmax sees). O += P V multiplies
// in float16, two products per instruction, and sums FLOAT16_TERMS keys per half of a f16vec2
// before adding that partial sum to O's float32 accumulator (a relative error, which O's tolerance
// absorbs); a row that sees a V value large enough to overflow such a partial (or inf or NaN)
// takes float32 products instead.
// VKF_FLOAT16_MATH = 0: a word is a vec4 of 4 floats (float16 tensors are converted when staged);
// every product and sum is float32.
//
// Include after scalar/tensor_io.glsl (storage_t).
#ifndef VKFLASH_REGISTER_TILE_GLSL
#define VKFLASH_REGISTER_TILE_GLSL

#if VKF_FLOAT16_MATH
#define word_t uvec4
#define p_t float16_t
const uint WORD_COLS = 8;
// Keys per float16 partial sum of P V.
const uint FLOAT16_TERMS = 16;
#else
#define word_t vec4
#define p_t float
const uint WORD_COLS = 4;
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

#if VKF_FLOAT16_MATH
// The largest |element| of a word, as float16 bits without the sign: they order as the magnitudes
// do, with inf and NaN above every finite value.
uint word_abs_max_bits(word_t w) {
  const uvec4 a = w & 0x7fff7fffu;
  const uvec4 m = max(a & 0xffffu, a >> 16);
  return max(max(m.x, m.y), max(m.z, m.w));
}
// float16 2048: below it, 16 keys' P V (P <= 1) cannot overflow a float16 partial sum.
const uint FLOAT16_PARTIAL_SAFE_BITS = 0x6800u;
#endif

// --- Products ---

#if VKF_FLOAT16_MATH
// The word as floats.
void word_to_f32(word_t w, out vec4 lo, out vec4 hi) {
  lo = vec4(vec2(unpackFloat2x16(w.x)), vec2(unpackFloat2x16(w.y)));
  hi = vec4(vec2(unpackFloat2x16(w.z)), vec2(unpackFloat2x16(w.w)));
}
#endif

#endif
