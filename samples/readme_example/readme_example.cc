// Attention forward on the best Vulkan device: upload Q, K, V, run, download O and LSE.
#include <vkflash/vkflash.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  auto ctx = vkflash::Context::Create();  // own instance and device: VKFLASH_DEVICE, else the best
  if (!ctx.ok()) return std::printf("%s\n", ctx.status().ToString().c_str()), 1;

  vkflash::AttentionParams params;
  params.shape = {/*batch*/ 1, /*q_heads*/ 4, /*kv_heads*/ 2, /*q_len*/ 128, /*kv_len*/ 128, /*head_dim*/ 64};
  params.dtype = vkflash::DataType::kFloat32;  // storage; kFloat16 takes uint16_t halves
  params.causal = true;                        // params.scale unset: 1/sqrt(head_dim)

  std::vector<float> q(params.shape.q_elements(), 0.5f), kv(params.shape.kv_elements(), 0.25f);
  std::vector<float> o(q.size()), lse(params.shape.lse_elements());
  auto q_buf = (*ctx)->CreateBuffer(q.size() * 4), k_buf = (*ctx)->CreateBuffer(kv.size() * 4);
  auto v_buf = (*ctx)->CreateBuffer(kv.size() * 4), o_buf = (*ctx)->CreateBuffer(o.size() * 4);
  auto lse_buf = (*ctx)->CreateBuffer(lse.size() * 4);
  for (auto* b : {&q_buf, &k_buf, &v_buf, &o_buf, &lse_buf})
    if (!b->ok()) return std::printf("%s\n", b->status().ToString().c_str()), 1;

  vkflash::Status s = (*ctx)->Upload(q_buf->view(), q.data(), q.size() * 4);
  if (s.ok()) s = (*ctx)->Upload(k_buf->view(), kv.data(), kv.size() * 4);
  if (s.ok()) s = (*ctx)->Upload(v_buf->view(), kv.data(), kv.size() * 4);
  vkflash::ForwardBuffers buffers{q_buf->view(), k_buf->view(), v_buf->view(), o_buf->view(), lse_buf->view()};
  if (s.ok()) s = (*ctx)->Forward(params, buffers);  // records, submits and waits
  if (s.ok()) s = (*ctx)->Download(o_buf->view(), o.data(), o.size() * 4);
  if (s.ok()) s = (*ctx)->Download(lse_buf->view(), lse.data(), lse.size() * 4);
  if (!s.ok()) return std::printf("%s\n", s.ToString().c_str()), 1;

  // Every V row is 0.25, so O is 0.25; causal row 0 sees only key 0: LSE = scale * q.k = 1.
  std::printf("O[0] = %g, LSE[0] = %g\n", o[0], lse[0]);
  bool right = std::fabs(o.back() - 0.25f) < 1e-6f && std::fabs(lse[0] - 1.0f) < 1e-5f;
  if (!right) std::printf("unexpected result\n");
  return right ? 0 : 1;
}
