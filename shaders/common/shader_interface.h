// Shared by the C++ engine and the GLSL shaders: push-constant layouts, specialization-constant
// ids and descriptor bindings. Keep it plain C/GLSL: no C++ beyond the guarded block.
#ifndef VKFLASH_SHADER_INTERFACE_H
#define VKFLASH_SHADER_INTERFACE_H

#ifdef __cplusplus
#include <cstdint>
namespace vkflash::gpu {
using uint = std::uint32_t;
#endif

// Specialization constant ids (every attention kernel uses the same ids).
#define VKF_SPEC_WORKGROUP_SIZE 0
#define VKF_SPEC_HEAD_DIM 1
#define VKF_SPEC_BLOCK_Q 2
#define VKF_SPEC_BLOCK_KV 3
#define VKF_SPEC_THREADS_PER_ROW 4
#define VKF_SPEC_CAUSAL 5
#define VKF_SPEC_WRITE_LSE 6

// Forward pass storage-buffer bindings (set 0).
#define VKF_FWD_BINDING_Q 0
#define VKF_FWD_BINDING_K 1
#define VKF_FWD_BINDING_V 2
#define VKF_FWD_BINDING_O 3
#define VKF_FWD_BINDING_LSE 4
#define VKF_FWD_BINDING_COUNT 5

// Forward push constants. Dispatch: (ceil(q_len / BLOCK_Q), q_heads, batch).
struct ForwardPush {
  uint batch;
  uint q_heads;
  uint kv_heads;
  uint q_len;
  uint kv_len;
  float scale_log2;  // softmax scale * log2(e): the kernel works in base 2 (exp2 is the fast path)
};

#ifdef __cplusplus
static_assert(sizeof(ForwardPush) == 24, "push constant layout must match GLSL std430");
}  // namespace vkflash::gpu
#endif

#endif  // VKFLASH_SHADER_INTERFACE_H
