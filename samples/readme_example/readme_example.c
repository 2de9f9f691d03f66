/* Attention forward from C: upload Q, K, V, run, download O. */
#include <vkflash/vkflash.h>

#include <math.h>
#include <stdio.h>

int main(void) {
  static float q[4 * 128 * 64], kv[2 * 128 * 64], o[4 * 128 * 64]; /* float32, [B, H, N, D] */
  for (int i = 0; i < 4 * 128 * 64; ++i) q[i] = 0.5f;
  for (int i = 0; i < 2 * 128 * 64; ++i) kv[i] = 0.25f;
  VkfAttentionParams params = {.struct_size = sizeof(VkfAttentionParams), .causal = VK_TRUE}; /* zero: defaults */
  params.shape = (VkfAttentionShape){.batch = 1, .q_heads = 4, .kv_heads = 2, .q_len = 128, .kv_len = 128, .head_dim = 64};

  VkfContext ctx = NULL;
  VkfBuffer q_buf = NULL, k_buf = NULL, v_buf = NULL, o_buf = NULL;
  VkfResult r = vkfCreateContext(NULL, &ctx); /* own instance and device: VKFLASH_DEVICE, else the best */
  if (r == VKF_SUCCESS) r = vkfCreateBuffer(ctx, sizeof q, &q_buf);
  if (r == VKF_SUCCESS) r = vkfCreateBuffer(ctx, sizeof kv, &k_buf);
  if (r == VKF_SUCCESS) r = vkfCreateBuffer(ctx, sizeof kv, &v_buf);
  if (r == VKF_SUCCESS) r = vkfCreateBuffer(ctx, sizeof o, &o_buf);
  if (r == VKF_SUCCESS) r = vkfUpload(ctx, vkfGetBufferView(q_buf), q, sizeof q);
  if (r == VKF_SUCCESS) r = vkfUpload(ctx, vkfGetBufferView(k_buf), kv, sizeof kv);
  if (r == VKF_SUCCESS) r = vkfUpload(ctx, vkfGetBufferView(v_buf), kv, sizeof kv);
  VkfForwardBuffers buffers = {.struct_size = sizeof(VkfForwardBuffers), .q = vkfGetBufferView(q_buf),
                               .k = vkfGetBufferView(k_buf), .v = vkfGetBufferView(v_buf), .o = vkfGetBufferView(o_buf)};
  if (r == VKF_SUCCESS) r = vkfForward(ctx, &params, &buffers); /* records, submits, waits; no LSE asked */
  if (r == VKF_SUCCESS) r = vkfDownload(ctx, vkfGetBufferView(o_buf), o, sizeof o);
  const int right = r == VKF_SUCCESS && fabsf(o[4 * 128 * 64 - 1] - 0.25f) < 1e-6f; /* every V row is 0.25 */
  if (r == VKF_SUCCESS) printf("O[0] = %g%s\n", o[0], right ? "" : ", unexpected");
  else printf("%s\n", vkfGetLastErrorMessage());
  vkfDestroyContext(ctx); /* and the buffers it made (vkfDestroyBuffer frees one sooner) */
  return right ? 0 : 1;
}
