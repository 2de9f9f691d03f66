// Live inputs for the viewer: Q, K, V written on the GPU every frame from a pattern and the time,
// so nothing is uploaded per frame. Patterns give the attention matrix recognisable structure.
#version 450
#extension GL_GOOGLE_include_directive : require
#if VIEWER_F16
#extension GL_EXT_shader_16bit_storage : require
#define storage_t float16_t
#else
#define storage_t float
#endif
#include "viewer_interface.h"

layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer QBlock { storage_t q_data[]; };
layout(std430, binding = 1) writeonly buffer KBlock { storage_t k_data[]; };
layout(std430, binding = 2) writeonly buffer VBlock { storage_t v_data[]; };
layout(push_constant) uniform Push { InputsPush pc; };

float hash(uvec4 v) {  // PCG-style integer hash -> [-1, 1)
  v = v * 1664525u + 1013904223u;
  v.x += v.y * v.w; v.y += v.z * v.x; v.z += v.x * v.y; v.w += v.y * v.z;
  v ^= v >> 16u;
  v.x += v.y * v.w; v.y += v.z * v.x; v.z += v.x * v.y; v.w += v.y * v.z;
  return float(v.x >> 8) / 8388608.0 - 1.0;
}

// Noise that drifts slowly with time (blend of two seeds).
float noise(uint tensor, uint head, uint row, uint d) {
  const float t = pc.time * 0.4;
  const uint seed = uint(floor(t));
  const float a = hash(uvec4(tensor * 7919u + head, row, d, seed));
  const float b = hash(uvec4(tensor * 7919u + head, row, d, seed + 1u));
  return 1.7 * mix(a, b, smoothstep(0.0, 1.0, fract(t)));
}

// Positional features: q_i . k_j is large when i and j are close (a diagonal band).
float positional(uint row, uint d, float sharpness) {
  const float frequency = 6.2831853 / (8.0 + 4.0 * float(d / 2));
  const float angle = float(row) * frequency;
  return sharpness * ((d & 1u) == 0u ? cos(angle) : sin(angle));
}

float element(uint tensor, uint head, uint row, uint d) {  // tensor: 0 Q, 1 K, 2 V
  if (tensor == 2u) return noise(tensor, head, row, d);
  uint pattern = pc.pattern;
  if (pattern == VIEWER_PATTERN_MIXED_HEADS) pattern = (head + 1u) % 3u;  // head 0 local, 1 sink, 2 random
  if (pattern == VIEWER_PATTERN_LOCAL) {
    return positional(row, d, 1.6 + 0.6 * sin(pc.time)) + 0.3 * noise(tensor, head, row, d);
  }
  if (pattern == VIEWER_PATTERN_SINK) {  // every query attends to key 0 (an "attention sink")
    if (tensor == 1u && row == 0u) return 3.0;
    return tensor == 0u ? 1.2 + 0.3 * noise(tensor, head, row, d) : 0.5 * noise(tensor, head, row, d);
  }
  return noise(tensor, head, row, d);
}

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i < pc.q_elements) {
    const uint d = i % pc.head_dim, row = (i / pc.head_dim) % pc.q_len, head = (i / (pc.head_dim * pc.q_len)) % pc.q_heads;
    q_data[i] = storage_t(element(0u, head, row, d));
  }
  if (i < pc.kv_elements) {
    const uint d = i % pc.head_dim, row = (i / pc.head_dim) % pc.kv_len, head = (i / (pc.head_dim * pc.kv_len)) % pc.kv_heads;
    k_data[i] = storage_t(element(1u, head, row, d));
    v_data[i] = storage_t(element(2u, head, row, d));
  }
}
