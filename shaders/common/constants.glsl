// Floating-point constants of the attention kernels, defined once. Infinities are written as bit
// patterns: GLSL has no literal for them, and 1.0 / 0.0 is not a constant expression everywhere.
#ifndef VKFLASH_CONSTANTS_GLSL
#define VKFLASH_CONSTANTS_GLSL

#define NEG_INF uintBitsToFloat(0xff800000u)
#define POS_INF uintBitsToFloat(0x7f800000u)
#define FLT_MAX uintBitsToFloat(0x7f7fffffu)  // the largest finite float
const float LN2 = 0.6931471805599453;    // ln(2): base-2 results (m, LSE) to natural log units
const float LOG2E = 1.4426950408889634;  // log2(e): natural-log values (the LSE) to base 2

#endif
