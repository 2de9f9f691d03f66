// Bindings and indexing shared by the three naive baseline kernels.
#ifndef VKFLASH_NAIVE_COMMON_GLSL
#define VKFLASH_NAIVE_COMMON_GLSL

VKF_TENSOR_IN(VKF_NAIVE_BINDING_Q, q_data);
VKF_TENSOR_IN(VKF_NAIVE_BINDING_K, k_data);
VKF_TENSOR_IN(VKF_NAIVE_BINDING_V, v_data);
VKF_TENSOR_OUT(VKF_NAIVE_BINDING_O, o_data);
layout(std430, set = 0, binding = VKF_NAIVE_BINDING_SCORES) buffer scores_block { float scores[]; };  // Nq x Nk
layout(push_constant) uniform PushBlock { NaivePush pc; };

uint q_row_base(uint i) { return (pc.slice * pc.q_len + i) * pc.head_dim; }
uint kv_row_base(uint j) {
  const uint batch = pc.slice / pc.q_heads, head = pc.slice % pc.q_heads;
  const uint kv_head = head / (pc.q_heads / pc.kv_heads);
  return ((batch * pc.kv_heads + kv_head) * pc.kv_len + j) * pc.head_dim;
}

#endif
