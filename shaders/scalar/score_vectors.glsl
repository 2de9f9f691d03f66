// The register-tiled gradient kernels' score tiles (P^T and dS^T, or dS) as vectors of
// SCORES_PER_LOAD streamed rows: the scores are written one at a time (by the invocation that
// computed each) and read a vector at a time (by those that sum over the streamed rows).
#ifndef VKFLASH_SCORE_VECTORS_GLSL
#define VKFLASH_SCORE_VECTORS_GLSL

const uint SCORES_PER_LOAD = VKF_TILED_GRADIENT_SCORES_PER_LOAD;
#if VKF_TILED_GRADIENT_SCORES_PER_LOAD == 4
#define score_vec_t vec4
#elif VKF_TILED_GRADIENT_SCORES_PER_LOAD == 2
#define score_vec_t vec2
#else
#error "scores per load: 2 or 4"
#endif

#endif
