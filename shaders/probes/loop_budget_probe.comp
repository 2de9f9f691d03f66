// How many loop iterations one invocation may run before the driver ends its loops. Mesa's
// llvmpipe/lavapipe before Mesa 24 gives each invocation 65535 (gallivm's loop limiter,
// LP_MAX_TGSI_LOOP_ITERATIONS, shared by every loop of the shader, decremented at each loop's end)
// and then leaves every loop early, silently: a long FlashAttention loop would stop part way. One
// invocation counts the iterations of a loop asked to run VKF_LOOP_PROBE_ITERATIONS times; the
// engine reads the count (the loop reads its increments from the buffer so that no compiler can
// fold it away).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"

layout(local_size_x = 1) in;
layout(std430, set = 0, binding = VKF_LOOP_PROBE_BINDING) buffer probe_block {
  uint iterations_done;
  uint ones[4];  // 1, 1, 1, 1
};
layout(push_constant) uniform PushBlock { uint iterations; } pc;

void main() {
  uint done = 0;
  for (uint i = 0; i < pc.iterations; ++i) done += ones[i & 3u];
  iterations_done = done;
}
