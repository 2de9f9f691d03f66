// A dot product as one chain of fused multiply-adds, shared by the scalar and decode kernels:
// `acc + dot(a, b)` costs a multiply and an add more per vec4 (the driver keeps dot's own sum).
#ifndef VKFLASH_FMA_DOT_GLSL
#define VKFLASH_FMA_DOT_GLSL

// acc + a.x b.x + a.y b.y + a.z b.z + a.w b.w, in that order, each step fused.
float fma_dot_add(float acc, vec4 a, vec4 b) {
  acc = fma(a.x, b.x, acc);
  acc = fma(a.y, b.y, acc);
  acc = fma(a.z, b.z, acc);
  return fma(a.w, b.w, acc);
}

#endif
