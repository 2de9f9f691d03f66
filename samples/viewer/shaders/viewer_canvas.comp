// Draws the viewer's picture from GPU buffers (no read-back): the attention heat map with the
// Br x Bc tile grid and the tiles the causal mask skips, the online softmax of one Q tile at the
// current key tile (running max m, running sum l, rescale exp(m_old - m_new) per row), and the
// per-tile max and sum written by the instrumented forward kernel. One invocation per pixel.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "viewer_interface.h"

layout(local_size_x = 16, local_size_y = 16) in;
layout(rgba8, binding = 0) writeonly uniform image2D canvas;
layout(std430, binding = 1) readonly buffer PBlock { float p_data[]; };
layout(std430, binding = 2) readonly buffer StatsBlock { float stats[]; };
layout(push_constant) uniform Push { CanvasPush pc; };

const vec3 BACKGROUND = vec3(0.075, 0.08, 0.095);
const vec3 GRID = vec3(0.55, 0.6, 0.7);
const vec3 SELECTED = vec3(0.2, 0.85, 1.0);
const vec3 CURRENT = vec3(1.0, 0.92, 0.25);

// A magma-like ramp: black, purple, red-orange, pale yellow.
vec3 ramp(float t) {
  t = clamp(t, 0.0, 1.0);
  const vec3 c0 = vec3(0.0, 0.0, 0.02), c1 = vec3(0.32, 0.07, 0.5), c2 = vec3(0.87, 0.29, 0.33), c3 = vec3(0.99, 0.96, 0.75);
  return t < 0.33 ? mix(c0, c1, t / 0.33) : t < 0.66 ? mix(c1, c2, (t - 0.33) / 0.33) : mix(c2, c3, (t - 0.66) / 0.34);
}

bool inside(ivec2 p, int r[4]) { return p.x >= r[0] && p.y >= r[1] && p.x < r[0] + r[2] && p.y < r[1] + r[3]; }
vec2 local01(ivec2 p, int r[4]) { return (vec2(p - ivec2(r[0], r[1])) + 0.5) / vec2(r[2], r[3]); }

uint q_tiles() { return (pc.q_len + pc.block_q - 1) / pc.block_q; }
uint kv_tiles() { return (pc.kv_len + pc.block_kv - 1) / pc.block_kv; }
// Key tiles the kernel visits for Q tile tq (causal: up to the diagonal), as in attention_mask.glsl.
uint visited_tiles(uint tq) {
  if (pc.causal == 0u) return kv_tiles();
  const int last_key = int(min((tq + 1) * pc.block_q, pc.q_len)) - 1 + int(pc.kv_len) - int(pc.q_len);
  const int end = clamp(last_key + 1, 0, int(pc.kv_len));
  return (uint(end) + pc.block_kv - 1) / pc.block_kv;
}
vec3 hatch(ivec2 p) { return ((p.x + p.y) & 7) < 2 ? vec3(0.26) : vec3(0.11); }
float stat(uint q_row, uint tile, uint field) {
  return stats[((pc.stats_row0 + q_row) * kv_tiles() + tile) * VKF_STATS_FLOATS_V + field];
}
// Pixel on the boundary of cell `index` of `count` cells across `extent` pixels?
bool on_boundary(int pixel, int extent, uint index, uint count) {
  const int a = int(round(float(index) * float(extent) / float(count)));
  const int b = int(round(float(index + 1) * float(extent) / float(count))) - 1;
  return pixel == a || pixel == b;
}

vec3 heat_map(ivec2 p) {
  const vec2 uv = local01(p, pc.heat);
  const uint i = min(uint(uv.y * float(pc.q_len)), pc.q_len - 1), j = min(uint(uv.x * float(pc.kv_len)), pc.kv_len - 1);
  const uint tq = i / pc.block_q, tk = j / pc.block_kv;
  const ivec2 local = p - ivec2(pc.heat[0], pc.heat[1]);
  // Tile borders in pixels (tiles are Br rows x Bc keys).
  const int y0 = int(round(float(tq * pc.block_q) * float(pc.heat[3]) / float(pc.q_len)));
  const int y1 = int(round(float(min((tq + 1) * pc.block_q, pc.q_len)) * float(pc.heat[3]) / float(pc.q_len))) - 1;
  const int x0 = int(round(float(tk * pc.block_kv) * float(pc.heat[2]) / float(pc.kv_len)));
  const int x1 = int(round(float(min((tk + 1) * pc.block_kv, pc.kv_len)) * float(pc.heat[2]) / float(pc.kv_len))) - 1;
  const bool border = local.y == y0 || local.y == y1 || local.x == x0 || local.x == x1;
  const bool wide_border = border || local.y == y0 + 1 || local.y == y1 - 1 || local.x == x0 + 1 || local.x == x1 - 1;

  if (tq == pc.q_tile && tk == pc.step && wide_border) return CURRENT;
  if (tq == pc.q_tile && (local.y == y0 || local.y == y1 || local.x == 0 || local.x == pc.heat[2] - 1)) return SELECTED;
  if (tk >= visited_tiles(tq)) return border ? vec3(0.2) : hatch(p);  // skipped: never computed
  vec3 color;
  const float value = p_data[i * pc.kv_len + j];
  color = value < 0.0 ? vec3(0.16, 0.15, 0.18) : ramp(sqrt(value));
  if (tq == pc.q_tile && tk > pc.step) color *= 0.45;  // tiles of the selected Q tile not reached yet
  return border ? mix(color, GRID, 0.55) : color;
}

vec3 softmax_panel(ivec2 p) {
  const vec2 uv = local01(p, pc.softmax);
  const uint rows = min(pc.block_q, pc.q_len - pc.q_tile * pc.block_q);
  const uint r = uint(uv.y * float(pc.block_q));
  if (r >= rows) return BACKGROUND;
  const uint column = uint(uv.x * 3.0);
  const float x = fract(uv.x * 3.0);
  if (x > 0.94 || fract(uv.y * float(pc.block_q)) > 0.82) return BACKGROUND;  // gaps between bars
  if (pc.step >= visited_tiles(pc.q_tile)) return hatch(p);
  // Normalize m and l across the rows of the tile at this step.
  float m_lo = 3.0e38, m_hi = -3.0e38, l_hi = 0.0;
  for (uint k = 0; k < rows; ++k) {
    const float m = stat(pc.q_tile * pc.block_q + k, pc.step, VKF_STATS_RUNNING_MAX_V);
    if (!isinf(m)) m_lo = min(m_lo, m), m_hi = max(m_hi, m);
    l_hi = max(l_hi, stat(pc.q_tile * pc.block_q + k, pc.step, VKF_STATS_RUNNING_SUM_V));
  }
  const uint row = pc.q_tile * pc.block_q + r;
  float length;
  vec3 color;
  if (column == 0u) {
    const float m = stat(row, pc.step, VKF_STATS_RUNNING_MAX_V);
    length = isinf(m) ? 0.0 : 0.08 + 0.92 * (m - m_lo) / max(m_hi - m_lo, 1e-6);
    color = vec3(1.0, 0.55, 0.2);
  } else if (column == 1u) {
    length = stat(row, pc.step, VKF_STATS_RUNNING_SUM_V) / max(l_hi, 1e-20);
    color = vec3(0.3, 0.8, 1.0);
  } else {
    length = stat(row, pc.step, VKF_STATS_RESCALE_V);
    color = vec3(0.45, 0.95, 0.45);
  }
  return x < 0.94 * clamp(length, 0.0, 1.0) ? color : vec3(0.14, 0.15, 0.17);
}

vec3 tile_panel(ivec2 p, int r[4], bool show_max) {
  const vec2 uv = local01(p, r);
  const uint tq = min(uint(uv.y * float(q_tiles())), q_tiles() - 1), tk = min(uint(uv.x * float(kv_tiles())), kv_tiles() - 1);
  const ivec2 local = p - ivec2(r[0], r[1]);
  const bool border = on_boundary(local.y, r[3], tq, q_tiles()) || on_boundary(local.x, r[2], tk, kv_tiles());
  if (tq == pc.q_tile && tk == pc.step && border) return CURRENT;
  if (tk >= visited_tiles(tq)) return border ? vec3(0.2) : hatch(p);
  float value = show_max ? -3.0e38 : 0.0;
  for (uint k = 0; k < pc.block_q && tq * pc.block_q + k < pc.q_len; ++k) {
    const uint row = tq * pc.block_q + k;
    if (show_max) value = max(value, stat(row, tk, VKF_STATS_TILE_MAX_V));
    else value += stat(row, tk, VKF_STATS_TILE_SUM_V);
  }
  const float t = show_max ? (isinf(value) ? 0.0 : (value + 2.0) / 10.0) : sqrt(value / float(pc.block_q * pc.block_kv));
  const vec3 color = ramp(t);
  return border ? mix(color, GRID, 0.5) : color;
}

void main() {
  const ivec2 p = ivec2(gl_GlobalInvocationID.xy);
  if (any(greaterThanEqual(p, imageSize(canvas)))) return;
  vec3 color = BACKGROUND;
  if (inside(p, pc.heat)) color = heat_map(p);
  else if (inside(p, pc.softmax)) color = softmax_panel(p);
  else if (inside(p, pc.tile_max)) color = tile_panel(p, pc.tile_max, true);
  else if (inside(p, pc.tile_sum)) color = tile_panel(p, pc.tile_sum, false);
  imageStore(canvas, p, vec4(color, 1.0));
}
