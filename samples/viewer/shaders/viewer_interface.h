// Shared by the viewer's C++ and its GLSL shaders: push-constant layouts.
#ifndef VKFLASH_VIEWER_INTERFACE_H
#define VKFLASH_VIEWER_INTERFACE_H

#ifdef __cplusplus
#include <cstdint>
namespace viewer {
using uint = std::uint32_t;
#endif

// Fields of vkflash's instrumentation stats (the stats of vkflash::RecordInstrumentedForward, include/vkflash/diagnostics.hpp).
#define VKF_STATS_RUNNING_MAX_V 0
#define VKF_STATS_RUNNING_SUM_V 1
#define VKF_STATS_RESCALE_V 2
#define VKF_STATS_TILE_MAX_V 3
#define VKF_STATS_TILE_SUM_V 4
#define VKF_STATS_FLOATS_V 5

#define VIEWER_PATTERN_RANDOM 0
#define VIEWER_PATTERN_LOCAL 1
#define VIEWER_PATTERN_SINK 2
#define VIEWER_PATTERN_MIXED_HEADS 3  // head 0 local, head 1 sink, head 2 random, and so on

// viewer_inputs.comp: writes Q, K, V for `time` (one invocation per element of Q / K).
struct InputsPush {
  uint q_elements;
  uint kv_elements;
  uint q_heads;
  uint kv_heads;
  uint q_len;
  uint kv_len;
  uint head_dim;
  uint pattern;
  float time;
};

// viewer_probabilities.comp: row-normalized attention exp(S - rowmax) of one (batch, head).
struct ProbabilitiesPush {
  uint q_heads;
  uint kv_heads;
  uint q_len;
  uint kv_len;
  uint head_dim;
  uint batch;
  uint head;
  uint causal;
  float scale;
};

// viewer_canvas.comp: the whole picture; rectangles are (x, y, width, height) in pixels.
struct CanvasPush {
  int heat[4];      // heat map of P with the tile grid
  int softmax[4];   // online softmax of the selected Q tile at the current step
  int tile_max[4];  // per-tile max score
  int tile_sum[4];  // per-tile sum of exp(S - m)
  uint q_len;
  uint kv_len;
  uint block_q;
  uint block_kv;
  uint causal;
  uint q_tile;      // selected Q tile
  uint step;        // current key tile of the animation
  uint stats_row0;  // stats row index of (batch, head, query 0)
};

#ifdef __cplusplus
}  // namespace viewer
#endif
#endif
