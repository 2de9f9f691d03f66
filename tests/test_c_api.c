/* The C API (include/vkflash/vkflash.h), from C: version, errors, struct versions, devices, forward
 * and backward against a float64 reference written here, a bool mask, the record path into the
 * test's own command buffer on an adopted device, and clean destruction. Every Vulkan instance runs
 * the validation layer with synchronization validation; any message it reports fails the test.
 * Exit 0 only if every check passed (and there were checks). */
#include <vkflash/vkflash.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Checks ---------------------------------------------------------------------------------- */

static int g_checks = 0, g_failures = 0, g_validation_messages = 0;

/* Records one check and prints it: "ok" or "FAIL", what was checked, and the library's last error
 * message where the check failed. */
static int check(int passed, const char* format, ...) {
  va_list args;
  ++g_checks;
  if (!passed) ++g_failures;
  printf("%s ", passed ? "ok  " : "FAIL");
  va_start(args, format);
  vprintf(format, args);
  va_end(args);
  if (!passed && vkfGetLastErrorMessage()[0] != '\0') printf("  [last error: %s]", vkfGetLastErrorMessage());
  printf("\n");
  fflush(stdout);
  return passed;
}

/* A call that must succeed. */
static int check_ok(VkfResult result, const char* what) {
  return check(result == VKF_SUCCESS, "%s: %s", what, vkfResultName(result));
}

/* A call that must fail with `expected` and leave a message saying why. */
static void check_error(VkfResult result, VkfResult expected, const char* what) {
  const char* message = vkfGetLastErrorMessage();
  check(result == expected && message[0] != '\0', "%s: %s (expected %s), message \"%s\"", what, vkfResultName(result),
        vkfResultName(expected), message);
}

static void on_validation_message(VkfMessageSeverity severity, const char* message, void* user_data) {
  (void)user_data;
  ++g_validation_messages;
  printf("VALIDATION %s: %s\n", severity == VKF_MESSAGE_SEVERITY_ERROR ? "error" : "warning", message);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                       VkDebugUtilsMessageTypeFlagsEXT types,
                                                       const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  (void)types;
  on_validation_message(severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? VKF_MESSAGE_SEVERITY_ERROR
                                                                                   : VKF_MESSAGE_SEVERITY_WARNING,
                        data && data->pMessage ? data->pMessage : "(no message)", user);
  return VK_FALSE;
}

static void* checked_calloc(size_t count, size_t size) {
  void* p = calloc(count ? count : 1, size ? size : 1);
  if (p == NULL) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  return p;
}

/* ---- Values ---------------------------------------------------------------------------------- */

static uint32_t next_random(uint32_t* state) { /* xorshift32 */
  uint32_t x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *state = x;
}

/* Uniform in [-2, 2). */
static float random_value(uint32_t* state) { return (float)((next_random(state) >> 8) * (4.0 / 16777216.0) - 2.0); }

/* IEEE half <-> float, round to nearest even (enough for finite values of moderate size). */
static uint16_t float_to_half(float value) {
  uint32_t bits, sign, exponent, mantissa;
  memcpy(&bits, &value, 4);
  sign = (bits >> 16) & 0x8000u;
  exponent = (bits >> 23) & 0xffu;
  mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) return (uint16_t)(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  {
    int e = (int)exponent - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half */
      uint32_t m, shift, half, rounded;
      if (e < -10) return (uint16_t)sign;
      m = mantissa | 0x800000u;
      shift = (uint32_t)(14 - e);
      half = m >> shift;
      rounded = m & ((1u << shift) - 1u);
      if (rounded > (1u << (shift - 1)) || (rounded == (1u << (shift - 1)) && (half & 1u))) ++half;
      return (uint16_t)(sign | half);
    }
    {
      uint32_t half = sign | ((uint32_t)e << 10) | (mantissa >> 13);
      uint32_t rest = mantissa & 0x1fffu;
      if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half; /* may carry into the exponent */
      return (uint16_t)half;
    }
  }
}

static float half_to_float(uint16_t half) {
  uint32_t sign = (uint32_t)(half & 0x8000u) << 16, exponent = (half >> 10) & 0x1fu, mantissa = half & 0x3ffu, bits;
  float value;
  if (exponent == 0) {
    value = ldexpf((float)mantissa, -24);
    return sign ? -value : value;
  }
  if (exponent == 31) bits = sign | 0x7f800000u | (mantissa << 13);
  else bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  memcpy(&value, &bits, 4);
  return value;
}

/* A tensor on the host: its values as the device sees them (float16-rounded for float16), and
 * their bytes in the call's dtype. */
typedef struct HostTensor {
  size_t count;
  VkfDataType dtype;
  float* values;
  void* bytes;
} HostTensor;

static size_t tensor_bytes(const HostTensor* t) { return t->count * vkfDataTypeSize(t->dtype); }

static HostTensor random_tensor(size_t count, VkfDataType dtype, uint32_t seed) {
  HostTensor t;
  size_t i;
  uint32_t state = seed * 2654435761u + 1u;
  t.count = count;
  t.dtype = dtype;
  t.values = (float*)checked_calloc(count, sizeof(float));
  t.bytes = checked_calloc(count, vkfDataTypeSize(dtype));
  for (i = 0; i < count; ++i) {
    float x = random_value(&state);
    if (dtype == VKF_DTYPE_FLOAT16) {
      uint16_t h = float_to_half(x);
      ((uint16_t*)t.bytes)[i] = h;
      x = half_to_float(h);
    } else {
      ((float*)t.bytes)[i] = x;
    }
    t.values[i] = x;
  }
  return t;
}

static void free_tensor(HostTensor* t) {
  free(t->values);
  free(t->bytes);
  t->values = NULL;
  t->bytes = NULL;
}

/* sqrt(sum (a - e)^2 / sum e^2), as tools/host/reference_attention.cc: infinities must match
 * exactly, NaN never does. */
static double relative_error(const float* actual, const double* expected, size_t count) {
  double diff = 0.0, norm = 0.0;
  size_t i;
  for (i = 0; i < count; ++i) {
    const double a = actual[i], e = expected[i];
    if (isnan(a)) return INFINITY;
    if (isinf(a) || isinf(e)) {
      if (a != e) return INFINITY;
      continue;
    }
    diff += (a - e) * (a - e);
    norm += e * e;
  }
  return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}

/* docs/design.md's tolerances (those of tests/support/attention_case.h). */
static double forward_tolerance(VkfDataType dtype) { return dtype == VKF_DTYPE_FLOAT16 ? 5e-3 : 2e-4; }
static double backward_tolerance(VkfDataType dtype) { return dtype == VKF_DTYPE_FLOAT16 ? 1e-2 : 5e-4; }

/* ---- The float64 reference ------------------------------------------------------------------- */

/* What one reference call computes: packed [B, H, N, D] tensors, optional causal (bottom-right
 * aligned) and an optional bool mask [Nq, Nk] shared by every batch entry and head. */
typedef struct Problem {
  VkfAttentionShape shape;
  int causal;
  double scale;
  const unsigned char* mask;
} Problem;

static size_t q_elements(const VkfAttentionShape* s) { return (size_t)s->batch * s->q_heads * s->q_len * s->head_dim; }
static size_t kv_elements(const VkfAttentionShape* s) { return (size_t)s->batch * s->kv_heads * s->kv_len * s->head_dim; }
static size_t lse_elements(const VkfAttentionShape* s) { return (size_t)s->batch * s->q_heads * s->q_len; }

static int visible(const Problem* p, uint32_t i, uint32_t j) {
  if (p->causal && (int64_t)j > (int64_t)i + p->shape.kv_len - p->shape.q_len) return 0;
  return p->mask == NULL || p->mask[(size_t)i * p->shape.kv_len + j] != 0;
}

/* Row (b, h, i) of Q and row (b, h / group, j) of K or V. */
static const float* q_row(const Problem* p, const float* q, uint32_t b, uint32_t h, uint32_t i) {
  const VkfAttentionShape* s = &p->shape;
  return q + (((size_t)b * s->q_heads + h) * s->q_len + i) * s->head_dim;
}
static size_t kv_offset(const Problem* p, uint32_t b, uint32_t h, uint32_t j) {
  const VkfAttentionShape* s = &p->shape;
  const uint32_t kv_head = h / (s->q_heads / s->kv_heads);
  return (((size_t)b * s->kv_heads + kv_head) * s->kv_len + j) * s->head_dim;
}

static double score(const Problem* p, const float* q, const float* k, uint32_t b, uint32_t h, uint32_t i, uint32_t j) {
  const float* qi = q_row(p, q, b, h, i);
  const float* kj = k + kv_offset(p, b, h, j);
  double dot = 0.0;
  uint32_t d;
  for (d = 0; d < p->shape.head_dim; ++d) dot += (double)qi[d] * kj[d];
  return p->scale * dot;
}

/* O = softmax(scale Q K^T) V and LSE; a row that sees no key: O = 0, LSE = -inf. */
static void reference_forward(const Problem* p, const float* q, const float* k, const float* v, double* o, double* lse) {
  const VkfAttentionShape* s = &p->shape;
  uint32_t b, h, i, j, d;
  for (b = 0; b < s->batch; ++b)
    for (h = 0; h < s->q_heads; ++h)
      for (i = 0; i < s->q_len; ++i) {
        const size_t row = ((size_t)b * s->q_heads + h) * s->q_len + i;
        double* oi = o + row * s->head_dim;
        double max = -INFINITY, sum = 0.0;
        for (d = 0; d < s->head_dim; ++d) oi[d] = 0.0;
        for (j = 0; j < s->kv_len; ++j)
          if (visible(p, i, j)) {
            const double x = score(p, q, k, b, h, i, j);
            if (x > max) max = x;
          }
        if (max == -INFINITY) {
          lse[row] = -INFINITY;
          continue;
        }
        for (j = 0; j < s->kv_len; ++j)
          if (visible(p, i, j)) {
            const double w = exp(score(p, q, k, b, h, i, j) - max);
            const float* vj = v + kv_offset(p, b, h, j);
            sum += w;
            for (d = 0; d < s->head_dim; ++d) oi[d] += w * vj[d];
          }
        for (d = 0; d < s->head_dim; ++d) oi[d] /= sum;
        lse[row] = max + log(sum);
      }
}

/* Gradients of sum(O * dO): P = exp(S - LSE), dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)),
 * dQ = scale dS K, dK = scale dS^T Q (summed over the query heads that share a KV head). */
static void reference_backward(const Problem* p, const float* q, const float* k, const float* v, const float* d_o,
                               double* dq, double* dk, double* dv) {
  const VkfAttentionShape* s = &p->shape;
  double* o = (double*)checked_calloc(q_elements(s), sizeof(double));
  double* lse = (double*)checked_calloc(lse_elements(s), sizeof(double));
  uint32_t b, h, i, j, d;
  reference_forward(p, q, k, v, o, lse);
  memset(dq, 0, q_elements(s) * sizeof(double));
  memset(dk, 0, kv_elements(s) * sizeof(double));
  memset(dv, 0, kv_elements(s) * sizeof(double));
  for (b = 0; b < s->batch; ++b)
    for (h = 0; h < s->q_heads; ++h)
      for (i = 0; i < s->q_len; ++i) {
        const size_t row = ((size_t)b * s->q_heads + h) * s->q_len + i;
        const float* doi = d_o + row * s->head_dim;
        const float* qi = q + row * s->head_dim;
        double delta = 0.0;
        if (lse[row] == -INFINITY) continue;
        for (d = 0; d < s->head_dim; ++d) delta += (double)doi[d] * o[row * s->head_dim + d];
        for (j = 0; j < s->kv_len; ++j) {
          const size_t kv = kv_offset(p, b, h, j);
          double prob, dp = 0.0, ds;
          if (!visible(p, i, j)) continue;
          prob = exp(score(p, q, k, b, h, i, j) - lse[row]);
          for (d = 0; d < s->head_dim; ++d) dp += (double)doi[d] * v[kv + d];
          ds = prob * (dp - delta);
          for (d = 0; d < s->head_dim; ++d) {
            dq[row * s->head_dim + d] += p->scale * ds * k[kv + d];
            dk[kv + d] += p->scale * ds * qi[d];
            dv[kv + d] += prob * doi[d];
          }
        }
      }
  free(o);
  free(lse);
}

/* ---- Device buffers -------------------------------------------------------------------------- */

/* A context buffer holding `bytes` of `data` (zeros where data is NULL), or NULL after a failed check. */
static VkfBuffer upload_new(VkfContext context, const void* data, size_t bytes, const char* what) {
  VkfBuffer buffer = NULL;
  if (!check_ok(vkfCreateBuffer(context, bytes, &buffer), what)) return NULL;
  if (data != NULL && vkfUpload(context, vkfGetBufferView(buffer), data, bytes) != VKF_SUCCESS) {
    check(0, "upload %s", what);
    vkfDestroyBuffer(context, buffer);
    return NULL;
  }
  return buffer;
}

/* Downloads `count` elements of `dtype` as floats. */
static int download_floats(VkfContext context, VkfBuffer buffer, VkfDataType dtype, size_t count, float* out) {
  void* raw = checked_calloc(count, vkfDataTypeSize(dtype));
  size_t i;
  const VkfResult result = vkfDownload(context, vkfGetBufferView(buffer), raw, count * vkfDataTypeSize(dtype));
  if (result == VKF_SUCCESS) {
    for (i = 0; i < count; ++i)
      out[i] = dtype == VKF_DTYPE_FLOAT16 ? half_to_float(((const uint16_t*)raw)[i]) : ((const float*)raw)[i];
  }
  free(raw);
  return check_ok(result, "download");
}

static double default_scale(const VkfAttentionShape* s) { return 1.0 / sqrt((double)(float)s->head_dim); }

/* ---- Forward and backward on the context's queue --------------------------------------------- */

typedef struct ForwardCase {
  VkfAttentionShape shape;
  VkfDataType dtype;
  VkBool32 causal;
  float scale; /* 0: the default */
} ForwardCase;

/* Random Q, K, V (and the mask, where given), vkfForward, O and LSE against the reference. */
static void forward_case(VkfContext context, const ForwardCase* c, const unsigned char* mask, uint32_t seed) {
  const VkfAttentionShape* s = &c->shape;
  VkfAttentionParams params = {.struct_size = sizeof(VkfAttentionParams)};
  VkfForwardBuffers buffers = {.struct_size = sizeof(VkfForwardBuffers)};
  HostTensor q = random_tensor(q_elements(s), c->dtype, seed), k = random_tensor(kv_elements(s), c->dtype, seed + 1),
             v = random_tensor(kv_elements(s), c->dtype, seed + 2);
  VkfBuffer q_buf, k_buf, v_buf, o_buf, lse_buf, mask_buf = NULL;
  Problem problem;
  char label[160];
  uint64_t mask_bytes = 0;

  params.shape = *s;
  params.dtype = c->dtype;
  params.causal = c->causal;
  if (c->scale != 0.0f) {
    params.has_scale = VK_TRUE;
    params.scale = c->scale;
  }
  if (mask != NULL) { /* [Nq, Nk], broadcast over batch entries and heads */
    params.mask.type = VKF_MASK_TYPE_BOOL;
    params.mask.broadcast_batch = VK_TRUE;
    params.mask.broadcast_heads = VK_TRUE;
  }
  snprintf(label, sizeof(label), "forward %s [B %u, Hq %u, Hkv %u, Nq %u, Nk %u, D %u]%s%s%s",
           c->dtype == VKF_DTYPE_FLOAT16 ? "float16" : "float32", s->batch, s->q_heads, s->kv_heads, s->q_len, s->kv_len,
           s->head_dim, c->causal ? " causal" : "", c->scale != 0.0f ? " scale" : "", mask ? " bool mask" : "");
  check_ok(vkfValidateAttentionParams(&params), "vkfValidateAttentionParams");

  q_buf = upload_new(context, q.bytes, tensor_bytes(&q), "Q buffer");
  k_buf = upload_new(context, k.bytes, tensor_bytes(&k), "K buffer");
  v_buf = upload_new(context, v.bytes, tensor_bytes(&v), "V buffer");
  o_buf = upload_new(context, NULL, tensor_bytes(&q), "O buffer");
  lse_buf = upload_new(context, NULL, lse_elements(s) * 4, "LSE buffer");
  if (mask != NULL) {
    unsigned char* padded;
    uint64_t elements = 0;
    check_ok(vkfMaskElements(&params, &elements), "vkfMaskElements");
    check_ok(vkfMaskBytes(&params, &mask_bytes), "vkfMaskBytes");
    check(elements == (uint64_t)s->q_len * s->kv_len && mask_bytes == (elements + 3) / 4 * 4,
          "mask of Nq x Nk: %llu elements, %llu bytes", (unsigned long long)elements, (unsigned long long)mask_bytes);
    padded = (unsigned char*)checked_calloc((size_t)mask_bytes, 1);
    memcpy(padded, mask, (size_t)elements);
    mask_buf = upload_new(context, padded, (size_t)mask_bytes, "mask buffer");
    free(padded);
  }
  if (q_buf && k_buf && v_buf && o_buf && lse_buf && (mask == NULL || mask_buf)) {
    buffers.q = vkfGetBufferView(q_buf);
    buffers.k = vkfGetBufferView(k_buf);
    buffers.v = vkfGetBufferView(v_buf);
    buffers.o = vkfGetBufferView(o_buf);
    buffers.lse = vkfGetBufferView(lse_buf);
    buffers.mask = vkfGetBufferView(mask_buf);
    if (check(vkfForward(context, &params, &buffers) == VKF_SUCCESS, "vkfForward: %s", label)) {
      float* o = (float*)checked_calloc(q.count, sizeof(float));
      float* lse = (float*)checked_calloc(lse_elements(s), sizeof(float));
      double* ref_o = (double*)checked_calloc(q.count, sizeof(double));
      double* ref_lse = (double*)checked_calloc(lse_elements(s), sizeof(double));
      if (download_floats(context, o_buf, c->dtype, q.count, o) &&
          download_floats(context, lse_buf, VKF_DTYPE_FLOAT32, lse_elements(s), lse)) {
        double o_error, lse_error;
        problem.shape = *s;
        problem.causal = c->causal != VK_FALSE;
        problem.scale = c->scale != 0.0f ? (double)c->scale : default_scale(s);
        problem.mask = mask;
        reference_forward(&problem, q.values, k.values, v.values, ref_o, ref_lse);
        o_error = relative_error(o, ref_o, q.count);
        lse_error = relative_error(lse, ref_lse, lse_elements(s));
        check(o_error <= forward_tolerance(c->dtype), "%s: O relative error %.2e <= %.0e", label, o_error,
              forward_tolerance(c->dtype));
        check(lse_error <= forward_tolerance(c->dtype), "%s: LSE relative error %.2e <= %.0e", label, lse_error,
              forward_tolerance(c->dtype));
      }
      free(o);
      free(lse);
      free(ref_o);
      free(ref_lse);
    }
  }
  vkfDestroyBuffer(context, q_buf);
  vkfDestroyBuffer(context, k_buf);
  vkfDestroyBuffer(context, v_buf);
  vkfDestroyBuffer(context, o_buf);
  vkfDestroyBuffer(context, lse_buf);
  vkfDestroyBuffer(context, mask_buf);
  free_tensor(&q);
  free_tensor(&k);
  free_tensor(&v);
}

/* The tensors of one backward check, on the device. */
typedef struct BackwardBuffers {
  VkfBuffer q, k, v, o, lse, d_o, dq, dk, dv, workspace;
} BackwardBuffers;

static void destroy_backward_buffers(VkfContext context, BackwardBuffers* b) {
  VkfBuffer* all[] = {&b->q, &b->k, &b->v, &b->o, &b->lse, &b->d_o, &b->dq, &b->dk, &b->dv, &b->workspace};
  size_t i;
  for (i = 0; i < sizeof(all) / sizeof(all[0]); ++i) {
    vkfDestroyBuffer(context, *all[i]);
    *all[i] = NULL;
  }
}

/* dQ, dK, dV downloaded from `b` against the reference for these inputs. */
static void check_gradients(VkfContext context, const char* label, const VkfAttentionParams* params, const BackwardBuffers* b,
                            const HostTensor* q, const HostTensor* k, const HostTensor* v, const HostTensor* d_o) {
  const VkfAttentionShape* s = &params->shape;
  Problem problem;
  const char* names[3] = {"dQ", "dK", "dV"};
  const VkfBuffer device[3] = {b->dq, b->dk, b->dv};
  const size_t counts[3] = {q_elements(s), kv_elements(s), kv_elements(s)};
  double* expected[3];
  int t;
  for (t = 0; t < 3; ++t) expected[t] = (double*)checked_calloc(counts[t], sizeof(double));
  problem.shape = *s;
  problem.causal = params->causal != VK_FALSE;
  problem.scale = default_scale(s);
  problem.mask = NULL;
  reference_backward(&problem, q->values, k->values, v->values, d_o->values, expected[0], expected[1], expected[2]);
  for (t = 0; t < 3; ++t) {
    float* actual = (float*)checked_calloc(counts[t], sizeof(float));
    if (download_floats(context, device[t], params->dtype, counts[t], actual)) {
      const double error = relative_error(actual, expected[t], counts[t]);
      check(error <= backward_tolerance(params->dtype), "%s: %s relative error %.2e <= %.0e", label, names[t], error,
            backward_tolerance(params->dtype));
    }
    free(actual);
    free(expected[t]);
  }
}

/* Uploads random inputs for `params` and makes every buffer of a backward call (the workspace
 * only with `workspace_bytes` > 0). 0 after a failed check. */
static int make_backward_buffers(VkfContext context, const VkfAttentionParams* params, uint64_t workspace_bytes,
                                 const HostTensor* q, const HostTensor* k, const HostTensor* v, const HostTensor* d_o,
                                 BackwardBuffers* b) {
  const VkfAttentionShape* s = &params->shape;
  memset(b, 0, sizeof(*b));
  b->q = upload_new(context, q->bytes, tensor_bytes(q), "Q buffer");
  b->k = upload_new(context, k->bytes, tensor_bytes(k), "K buffer");
  b->v = upload_new(context, v->bytes, tensor_bytes(v), "V buffer");
  b->d_o = upload_new(context, d_o->bytes, tensor_bytes(d_o), "dO buffer");
  b->o = upload_new(context, NULL, tensor_bytes(q), "O buffer");
  b->lse = upload_new(context, NULL, lse_elements(s) * 4, "LSE buffer");
  b->dq = upload_new(context, NULL, tensor_bytes(q), "dQ buffer");
  b->dk = upload_new(context, NULL, tensor_bytes(k), "dK buffer");
  b->dv = upload_new(context, NULL, tensor_bytes(v), "dV buffer");
  if (workspace_bytes > 0) b->workspace = upload_new(context, NULL, (size_t)workspace_bytes, "workspace buffer");
  return b->q && b->k && b->v && b->d_o && b->o && b->lse && b->dq && b->dk && b->dv &&
         (workspace_bytes == 0 || b->workspace);
}

static VkfForwardBuffers forward_views(const BackwardBuffers* b) {
  VkfForwardBuffers views = {.struct_size = sizeof(VkfForwardBuffers)};
  views.q = vkfGetBufferView(b->q);
  views.k = vkfGetBufferView(b->k);
  views.v = vkfGetBufferView(b->v);
  views.o = vkfGetBufferView(b->o);
  views.lse = vkfGetBufferView(b->lse);
  return views;
}

static VkfBackwardBuffers backward_views(const BackwardBuffers* b) {
  VkfBackwardBuffers views = {.struct_size = sizeof(VkfBackwardBuffers)};
  views.q = vkfGetBufferView(b->q);
  views.k = vkfGetBufferView(b->k);
  views.v = vkfGetBufferView(b->v);
  views.o = vkfGetBufferView(b->o);
  views.lse = vkfGetBufferView(b->lse);
  views.d_o = vkfGetBufferView(b->d_o);
  views.dq = vkfGetBufferView(b->dq);
  views.dk = vkfGetBufferView(b->dk);
  views.dv = vkfGetBufferView(b->dv);
  views.workspace = vkfGetBufferView(b->workspace);
  return views;
}

/* vkfForward then vkfBackward (the synchronous path, which makes its own workspace). */
static void backward_case(VkfContext context) {
  VkfAttentionParams params = {.struct_size = sizeof(VkfAttentionParams)};
  const VkfAttentionShape shape = {1, 4, 2, 7, 9, 16};
  const char* label = "backward float32 [B 1, Hq 4, Hkv 2, Nq 7, Nk 9, D 16] causal";
  HostTensor q, k, v, d_o;
  BackwardBuffers b;
  VkfKernelChoice dkdv = {.struct_size = sizeof(VkfKernelChoice)}, dq = {.struct_size = sizeof(VkfKernelChoice)};
  VkBool32 atomic_dq = VK_TRUE;
  uint64_t workspace_bytes = 0;

  params.shape = shape;
  params.causal = VK_TRUE;
  q = random_tensor(q_elements(&shape), params.dtype, 31);
  k = random_tensor(kv_elements(&shape), params.dtype, 32);
  v = random_tensor(kv_elements(&shape), params.dtype, 33);
  d_o = random_tensor(q_elements(&shape), params.dtype, 34);
  if (check_ok(vkfChooseBackwardKernels(context, &params, &dkdv, &dq, &atomic_dq), "vkfChooseBackwardKernels"))
    check(dkdv.kernel[0] != '\0' && dq.kernel[0] != '\0' && atomic_dq == VK_FALSE,
          "backward kernels: dK/dV %s (%s), dQ %s (%s), deterministic", dkdv.kernel, dkdv.family, dq.kernel, dq.family);
  if (check_ok(vkfBackwardWorkspaceBytes(context, &params, &workspace_bytes), "vkfBackwardWorkspaceBytes"))
    check(workspace_bytes >= lse_elements(&shape) * 4, "backward workspace: %llu bytes (at least a float per query row)",
          (unsigned long long)workspace_bytes);
  if (make_backward_buffers(context, &params, 0, &q, &k, &v, &d_o, &b)) {
    const VkfForwardBuffers forward = forward_views(&b);
    const VkfBackwardBuffers backward = backward_views(&b);
    if (check_ok(vkfForward(context, &params, &forward), "forward for the backward") &&
        check_ok(vkfBackward(context, &params, &backward), label)) {
      check_gradients(context, label, &params, &b, &q, &k, &v, &d_o);
    }
  }
  destroy_backward_buffers(context, &b);
  free_tensor(&q);
  free_tensor(&k);
  free_tensor(&v);
  free_tensor(&d_o);
}

/* ---- Timing through a C callback -------------------------------------------------------------- */

typedef struct RecordData {
  VkfContext context;
  const VkfAttentionParams* params;
  const VkfForwardBuffers* buffers;
  int calls;
} RecordData;

static VkfResult record_forward(VkCommandBuffer command_buffer, void* user_data) {
  RecordData* data = (RecordData*)user_data;
  ++data->calls;
  return vkfRecordForward(data->context, command_buffer, data->params, data->buffers);
}

static VkfResult record_nothing_and_fail(VkCommandBuffer command_buffer, void* user_data) {
  (void)command_buffer;
  (void)user_data;
  return VKF_ERROR_INVALID_ARGUMENT;
}

static void measure_case(VkfContext context, const VkfDeviceInfo* info) {
  VkfAttentionParams params = {.struct_size = sizeof(VkfAttentionParams)};
  const VkfAttentionShape shape = {1, 2, 2, 8, 8, 16};
  HostTensor q, k, v, d_o;
  BackwardBuffers b;
  uint64_t workspace_bytes = 0;
  double times[3] = {-1.0, -1.0, -1.0};
  params.shape = shape;
  q = random_tensor(q_elements(&shape), params.dtype, 41);
  k = random_tensor(kv_elements(&shape), params.dtype, 42);
  v = random_tensor(kv_elements(&shape), params.dtype, 43);
  d_o = random_tensor(q_elements(&shape), params.dtype, 44);
  check_ok(vkfForwardWorkspaceBytes(context, &params, &workspace_bytes), "vkfForwardWorkspaceBytes");
  if (make_backward_buffers(context, &params, workspace_bytes, &q, &k, &v, &d_o, &b)) {
    VkfForwardBuffers forward = forward_views(&b);
    RecordData data;
    VkfResult result;
    forward.workspace = vkfGetBufferView(b.workspace);
    data.context = context;
    data.params = &params;
    data.buffers = &forward;
    data.calls = 0;
    result = vkfMeasureGpuTime(context, record_forward, &data, 3, times);
    if (info->timestamp_period_ns > 0.0f) {
      check(result == VKF_SUCCESS && data.calls == 3 && times[0] >= 0.0 && times[1] >= 0.0 && times[2] >= 0.0,
            "vkfMeasureGpuTime, a C callback recording vkfRecordForward: %d runs, %.3f / %.3f / %.3f ms", data.calls,
            times[0], times[1], times[2]);
      result = vkfMeasureGpuTime(context, record_nothing_and_fail, NULL, 1, times);
      check_error(result, VKF_ERROR_INVALID_ARGUMENT, "vkfMeasureGpuTime: a failing callback's result is the call's");
    } else {
      check_error(result, VKF_ERROR_UNSUPPORTED, "vkfMeasureGpuTime without timestamps");
    }
  }
  destroy_backward_buffers(context, &b);
  free_tensor(&q);
  free_tensor(&k);
  free_tensor(&v);
  free_tensor(&d_o);
}

/* ---- Errors and struct versions, without a device --------------------------------------------- */

/* A newer header's params: one field appended. */
typedef struct FutureParams {
  VkfAttentionParams params;
  uint64_t future_field;
} FutureParams;

static void error_cases(void) {
  VkfAttentionParams params = {.struct_size = sizeof(VkfAttentionParams)};
  VkfContextCreateInfo info = {.struct_size = 0};
  VkfContext context = (VkfContext)&params; /* must be set to NULL on failure */
  FutureParams future;
  VkfTensorStrides strides = {0, 0, 0};
  uint64_t pairs = 0;
  uint32_t shape[4] = {0, 0, 0, 0};

  check_error(vkfCreateContext(NULL, NULL), VKF_ERROR_INVALID_ARGUMENT, "vkfCreateContext(NULL, NULL)");
  check_error(vkfCreateContext(&info, &context), VKF_ERROR_INVALID_ARGUMENT, "vkfCreateContext, struct_size 0");
  check(context == NULL, "a failed vkfCreateContext sets the context to NULL");
  check(strstr(vkfGetLastErrorMessage(), "struct_size") != NULL, "the message names struct_size");
  check_error(vkfValidateAttentionParams(NULL), VKF_ERROR_INVALID_ARGUMENT, "vkfValidateAttentionParams(NULL)");
  params.struct_size = 0;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_INVALID_ARGUMENT, "params with struct_size 0");
  params.struct_size = 8;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_INVALID_ARGUMENT, "params with struct_size 8");
  params.struct_size = 0xcccccccc;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_INVALID_ARGUMENT, "params with a garbage struct_size");

  params.struct_size = sizeof(VkfAttentionParams);
  params.shape.batch = 1;
  params.shape.q_heads = 3;
  params.shape.kv_heads = 2;
  params.shape.q_len = 4;
  params.shape.kv_len = 4;
  params.shape.head_dim = 16;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_INVALID_ARGUMENT, "invalid shape (Hq 3, Hkv 2)");
  check(strstr(vkfGetLastErrorMessage(), "multiple") != NULL, "its message says Hq must be a multiple of Hkv");
  params.shape.q_heads = 4;
  check_ok(vkfValidateAttentionParams(&params), "valid shape (Hq 4, Hkv 2)");
  check(vkfGetLastErrorMessage()[0] == '\0' && vkfGetLastVkResult() == VK_SUCCESS,
        "a success leaves the last error message empty");
  params.shape.head_dim = 0;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_UNSUPPORTED, "head dim 0");
  params.shape.head_dim = 16;
  params.dtype = (VkfDataType)7;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_INVALID_ARGUMENT, "dtype 7");
  params.dtype = VKF_DTYPE_FLOAT32;
  params.layout = (VkfTensorLayout)9;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_INVALID_ARGUMENT, "layout 9");
  params.layout = VKF_LAYOUT_BHSD;
  params.has_scale = VK_TRUE;
  params.scale = INFINITY;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_INVALID_ARGUMENT, "scale inf");
  params.has_scale = VK_FALSE; /* the scale field is then ignored */
  check_ok(vkfValidateAttentionParams(&params), "has_scale VK_FALSE ignores the scale field");
  params.kv_lengths_count = 1;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_INVALID_ARGUMENT, "kv_lengths NULL with a count of 1");
  params.kv_lengths_count = 0;
  params.causal = VK_TRUE;
  params.has_window = VK_TRUE;
  params.window.left = -1;
  params.window.right = 2;
  check_error(vkfValidateAttentionParams(&params), VKF_ERROR_INVALID_ARGUMENT, "causal with window right 2");
  params.has_window = VK_FALSE;

  /* Struct versions: an older header's size (the end of the first version's last field) and a
   * newer header's, whose unknown field must be zero. */
  params.struct_size = (uint32_t)(offsetof(VkfAttentionParams, cu_seqlens_k_count) + sizeof(uint32_t));
  check_ok(vkfValidateAttentionParams(&params), "params with the first version's exact size");
  memset(&future, 0, sizeof(future));
  future.params = params;
  future.params.struct_size = sizeof(FutureParams);
  check_ok(vkfValidateAttentionParams(&future.params), "a newer header's params, its new field zero");
  future.future_field = 1;
  check_error(vkfValidateAttentionParams(&future.params), VKF_ERROR_UNSUPPORTED,
              "a newer header's params, its new field set");
  params.struct_size = sizeof(VkfAttentionParams);

  /* Helpers without a device. Causal 4 x 4: 10 pairs per head, 4 heads. */
  if (check_ok(vkfVisiblePairs(&params, &pairs), "vkfVisiblePairs"))
    check(pairs == 40, "causal Nq = Nk = 4, Hq 4: %llu visible pairs (40)", (unsigned long long)pairs);
  check_error(vkfVisiblePairs(&params, NULL), VKF_ERROR_INVALID_ARGUMENT, "vkfVisiblePairs(params, NULL)");
  params.mask.type = VKF_MASK_TYPE_FLOAT16;
  params.mask.broadcast_heads = VK_TRUE;
  if (check_ok(vkfMaskBroadcastShape(&params, shape), "vkfMaskBroadcastShape"))
    check(shape[0] == 1 && shape[1] == 4 && shape[2] == 4 && shape[3] == 4, "mask broadcast shape [%u, %u, %u, %u]",
          shape[0], shape[1], shape[2], shape[3]);
  {
    uint64_t elements = 0, bytes = 0;
    check_ok(vkfMaskElements(&params, &elements), "vkfMaskElements");
    check_ok(vkfMaskBytes(&params, &bytes), "vkfMaskBytes");
    check(elements == 16 && bytes == 32, "a float16 [1, 1, 4, 4] mask: %llu elements, %llu bytes",
          (unsigned long long)elements, (unsigned long long)bytes);
  }
  params.mask.type = (VkfMaskType)8;
  check_error(vkfMaskBytes(&params, &pairs), VKF_ERROR_INVALID_ARGUMENT, "mask type 8");
  if (check_ok(vkfPackedStrides(VKF_LAYOUT_BSHD, 4, 10, 16, &strides), "vkfPackedStrides"))
    check(strides.batch == 640 && strides.head == 16 && strides.row == 64, "[B, N, H, D] strides %llu, %llu, %llu",
          (unsigned long long)strides.batch, (unsigned long long)strides.head, (unsigned long long)strides.row);
  check_error(vkfPackedStrides((VkfTensorLayout)5, 4, 10, 16, &strides), VKF_ERROR_INVALID_ARGUMENT, "layout 5");
  check(strcmp(vkfResultName(VKF_ERROR_DEVICE_NOT_FOUND), "device not found") == 0 &&
            strcmp(vkfResultName((VkfResult)-99), "unknown error") == 0,
        "vkfResultName: \"%s\", \"%s\"", vkfResultName(VKF_ERROR_DEVICE_NOT_FOUND), vkfResultName((VkfResult)-99));
  check(vkfDataTypeSize(VKF_DTYPE_FLOAT16) == 2 && vkfDataTypeSize(VKF_DTYPE_FLOAT32) == 4 &&
            vkfDataTypeSize((VkfDataType)3) == 0,
        "vkfDataTypeSize");
  check(vkfGetKernelsOptionValue(0) != NULL && strcmp(vkfGetKernelsOptionValue(0), "auto") == 0 &&
            vkfGetKernelsOptionValue(1000) == NULL,
        "vkfGetKernelsOptionValue: \"%s\" first, NULL past the end", vkfGetKernelsOptionValue(0));

  /* NULL handles are errors, and destroying NULL is a no-op. */
  check_error(vkfForward(NULL, &params, NULL), VKF_ERROR_INVALID_ARGUMENT, "vkfForward(NULL context)");
  check_error(vkfGetPipelineCount(NULL, &pairs), VKF_ERROR_INVALID_ARGUMENT, "vkfGetPipelineCount(NULL context)");
  vkfDestroyContext(NULL);
  vkfDestroyBuffer(NULL, NULL);
  check(vkfGetBufferView(NULL).buffer == VK_NULL_HANDLE, "vkfGetBufferView(NULL) is an empty view");
}

/* Devices: the list, and the selection vkfCreateContext makes. */
static void device_list_cases(void) {
  uint32_t count = 0, index = 99, i;
  VkfDeviceInfo* infos;
  if (!check_ok(vkfEnumerateDevices(NULL, 0, &count), "vkfEnumerateDevices(NULL, 0, &count)")) return;
  check(count >= 1, "%u Vulkan device(s)", count);
  check_error(vkfEnumerateDevices(NULL, 1, &count), VKF_ERROR_INVALID_ARGUMENT, "vkfEnumerateDevices(NULL, 1)");
  infos = (VkfDeviceInfo*)checked_calloc(count + 1, sizeof(VkfDeviceInfo));
  for (i = 0; i < count + 1; ++i) infos[i].struct_size = sizeof(VkfDeviceInfo);
  if (check_ok(vkfEnumerateDevices(infos, count + 1, &count), "vkfEnumerateDevices into an array"))
    for (i = 0; i < count; ++i)
      check(infos[i].name[0] != '\0' && infos[i].index == i, "device %u: %s (%s)", i, infos[i].name,
            vkfDeviceTypeName(infos[i].type));
  check(infos[count].name[0] == '\0', "the element past the devices is left alone");
  if (check_ok(vkfSelectDeviceIndex(NULL, &index), "vkfSelectDeviceIndex(NULL)"))
    check(index < count, "the default device is %u", index);
  check_error(vkfSelectDeviceIndex("no such device, surely", &index), VKF_ERROR_DEVICE_NOT_FOUND,
              "vkfSelectDeviceIndex(\"no such device, surely\")");
  free(infos);
}

/* Creation options the library refuses, each with its reason. */
static void bad_option_cases(void) {
  VkfContextCreateInfo info = {.struct_size = sizeof(VkfContextCreateInfo)};
  VkfTileOverrides tiles = {.struct_size = 4};
  VkfContext context = NULL;
  info.kernels = "no-such-family";
  check_error(vkfCreateContext(&info, &context), VKF_ERROR_INVALID_ARGUMENT, "kernels \"no-such-family\"");
  check(context == NULL, "no context made");
  info.kernels = NULL;
  info.device_selector = "no such device, surely";
  check_error(vkfCreateContext(&info, &context), VKF_ERROR_DEVICE_NOT_FOUND, "device_selector that names no device");
  info.device_selector = NULL;
  info.tile_overrides = &tiles;
  check_error(vkfCreateContext(&info, &context), VKF_ERROR_INVALID_ARGUMENT, "tile_overrides with struct_size 4");
  vkfDestroyContext(context);
}

/* ---- The context's own queue ---------------------------------------------------------------- */

static void context_cases(VkfContext context, const VkfDeviceInfo* info) {
  static const ForwardCase kCases[] = {
      {{1, 2, 2, 5, 7, 16}, VKF_DTYPE_FLOAT32, VK_FALSE, 0.3f},
      {{1, 4, 2, 9, 13, 16}, VKF_DTYPE_FLOAT32, VK_TRUE, 0.0f},  /* GQA, Nq != Nk */
      {{2, 4, 2, 8, 5, 32}, VKF_DTYPE_FLOAT16, VK_TRUE, 0.0f},   /* Nq > Nk: rows 0-2 see no key */
      {{1, 4, 2, 6, 11, 32}, VKF_DTYPE_FLOAT16, VK_FALSE, 0.0f},
  };
  const ForwardCase masked = {{1, 2, 1, 6, 9, 16}, VKF_DTYPE_FLOAT32, VK_FALSE, 0.0f};
  unsigned char mask[6 * 9];
  VkfAttentionParams params = {.struct_size = sizeof(VkfAttentionParams)};
  VkfKernelChoice choice = {.struct_size = sizeof(VkfKernelChoice)};
  VkfForwardBuffers buffers = {.struct_size = sizeof(VkfForwardBuffers)};
  VkfBuffer small = NULL;
  VkfPipelineCacheState cache_state = VKF_PIPELINE_CACHE_STATE_MAX_ENUM;
  uint64_t count = 0, allocated = 0, peak = 0;
  size_t i;
  uint32_t state = 7;

  for (i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    if (kCases[i].dtype == VKF_DTYPE_FLOAT16 && !info->storage_buffer_16bit) {
      printf("skip float16 case: the device has no storageBuffer16BitAccess\n");
      continue;
    }
    forward_case(context, &kCases[i], NULL, 100 + (uint32_t)i * 10);
  }
  /* A bool mask of about one pair in four blocked, and row 2 blocked entirely (O 0, LSE -inf). */
  for (i = 0; i < sizeof(mask); ++i) mask[i] = (next_random(&state) & 3u) != 0 && i / 9 != 2;
  forward_case(context, &masked, mask, 200);
  backward_case(context);
  measure_case(context, info);

  params.shape.batch = 1;
  params.shape.q_heads = 4;
  params.shape.kv_heads = 2;
  params.shape.q_len = 16;
  params.shape.kv_len = 16;
  params.shape.head_dim = 16;
  if (check_ok(vkfChooseForwardKernel(context, &params, &choice), "vkfChooseForwardKernel"))
    check(choice.kernel[0] != '\0' && choice.family[0] != '\0' && choice.block_q > 0 && choice.workgroup_size > 0,
          "forward kernel %s (%s family), %u x %u tiles, workgroup %u", choice.kernel, choice.family, choice.block_q,
          choice.block_kv, choice.workgroup_size);
  choice.struct_size = 0;
  check_error(vkfChooseForwardKernel(context, &params, &choice), VKF_ERROR_INVALID_ARGUMENT,
              "vkfChooseForwardKernel into a choice with struct_size 0");

  /* Bad calls on a live context. */
  check_error(vkfCreateBuffer(context, 0, &small), VKF_ERROR_INVALID_ARGUMENT, "vkfCreateBuffer of 0 bytes");
  check(small == NULL, "no buffer made");
  check_error(vkfForward(context, &params, NULL), VKF_ERROR_INVALID_ARGUMENT, "vkfForward(buffers NULL)");
  check_error(vkfForward(context, &params, &buffers), VKF_ERROR_INVALID_ARGUMENT, "vkfForward without Q, K, V, O");
  buffers.struct_size = 0;
  check_error(vkfForward(context, &params, &buffers), VKF_ERROR_INVALID_ARGUMENT, "vkfForward, buffers struct_size 0");
  buffers.struct_size = sizeof(VkfForwardBuffers);
  check_error(vkfRecordForward(context, VK_NULL_HANDLE, &params, &buffers), VKF_ERROR_INVALID_ARGUMENT,
              "vkfRecordForward(VK_NULL_HANDLE command buffer)");
  if (check_ok(vkfCreateBuffer(context, 64, &small), "vkfCreateBuffer of 64 bytes")) {
    float data[32] = {0};
    const VkfBufferView view = vkfGetBufferView(small);
    check(view.buffer != VK_NULL_HANDLE && view.offset == 0 && view.size == 64, "its view: offset 0, 64 bytes");
    check_error(vkfUpload(context, view, data, sizeof(data)), VKF_ERROR_INVALID_ARGUMENT, "128 bytes into 64");
    check_error(vkfUpload(context, view, NULL, 16), VKF_ERROR_INVALID_ARGUMENT, "vkfUpload from NULL");
    buffers.q = buffers.k = buffers.v = buffers.o = view; /* far too small for the shape */
    check_error(vkfForward(context, &params, &buffers), VKF_ERROR_INVALID_ARGUMENT, "vkfForward into 64-byte buffers");
    /* Left alive on purpose: vkfDestroyContext must free it (the layer reports a leaked buffer). */
  }

  if (check_ok(vkfGetPipelineCount(context, &count), "vkfGetPipelineCount"))
    check(count > 0, "%llu pipelines created", (unsigned long long)count);
  if (check_ok(vkfGetPipelineCacheState(context, &cache_state), "vkfGetPipelineCacheState"))
    check(cache_state == VKF_PIPELINE_CACHE_STATE_NOT_USED, "pipeline cache: %s", vkfPipelineCacheStateName(cache_state));
  if (check_ok(vkfGetAllocatedBytes(context, &allocated), "vkfGetAllocatedBytes") &&
      check_ok(vkfGetPeakAllocatedBytes(context, &peak), "vkfGetPeakAllocatedBytes"))
    check(allocated >= 64 && peak >= allocated, "%llu bytes allocated now, peak %llu", (unsigned long long)allocated,
          (unsigned long long)peak);
  if (check_ok(vkfResetPeakAllocatedBytes(context), "vkfResetPeakAllocatedBytes") &&
      check_ok(vkfGetPeakAllocatedBytes(context, &peak), "vkfGetPeakAllocatedBytes"))
    check(peak == allocated, "after the reset the peak is what is allocated (%llu)", (unsigned long long)peak);
}

/* ---- An engine's own device: adopt, record into its command buffer ----------------------------- */

typedef struct Engine {
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice physical;
  VkDevice device;
  VkQueue queue;
  uint32_t family;
  VkCommandPool pool;
} Engine;

/* An instance with the validation layer (synchronization validation on), the device vkflash
 * would pick, a compute queue and a command pool. 0 after a failed check. */
static int create_engine(Engine* e) {
  const char* layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
  VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
  VkDebugUtilsMessengerCreateInfoEXT messenger_info = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  VkValidationFeaturesEXT features = {VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  VkInstanceCreateInfo instance_info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  VkPhysicalDevice physicals[16];
  VkQueueFamilyProperties families[16];
  uint32_t physical_count = 16, family_count = 16, index = 0;
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  VkDeviceCreateInfo device_info = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  VkCommandPoolCreateInfo pool_info = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  PFN_vkCreateDebugUtilsMessengerEXT create_messenger;

  memset(e, 0, sizeof(*e));
  app.apiVersion = VK_API_VERSION_1_1;
  messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = on_debug_message;
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync;
  features.pNext = &messenger_info;
  instance_info.pNext = &features;
  instance_info.pApplicationInfo = &app;
  instance_info.enabledLayerCount = 1;
  instance_info.ppEnabledLayerNames = layers;
  instance_info.enabledExtensionCount = 2;
  instance_info.ppEnabledExtensionNames = extensions;
  if (!check(vkCreateInstance(&instance_info, NULL, &e->instance) == VK_SUCCESS, "engine: vkCreateInstance with validation"))
    return 0;
  create_messenger =
      (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(e->instance, "vkCreateDebugUtilsMessengerEXT");
  if (!check(create_messenger && create_messenger(e->instance, &messenger_info, NULL, &e->messenger) == VK_SUCCESS,
             "engine: debug messenger"))
    return 0;
  if (vkEnumeratePhysicalDevices(e->instance, &physical_count, physicals) < 0) physical_count = 0;
  if (!check(physical_count > 0, "engine: %u physical device(s)", physical_count)) return 0;
  if (vkfSelectDeviceIndex(NULL, &index) != VKF_SUCCESS || index >= physical_count) index = 0;
  e->physical = physicals[index];
  vkGetPhysicalDeviceQueueFamilyProperties(e->physical, &family_count, families);
  while (e->family < family_count && !(families[e->family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++e->family;
  if (!check(e->family < family_count, "engine: queue family %u has compute", e->family)) return 0;
  queue_info.queueFamilyIndex = e->family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  if (!check(vkCreateDevice(e->physical, &device_info, NULL, &e->device) == VK_SUCCESS, "engine: vkCreateDevice"))
    return 0;
  vkGetDeviceQueue(e->device, e->family, 0, &e->queue);
  pool_info.queueFamilyIndex = e->family;
  return check(vkCreateCommandPool(e->device, &pool_info, NULL, &e->pool) == VK_SUCCESS, "engine: command pool");
}

static void destroy_engine(Engine* e) {
  if (e->device) {
    vkDeviceWaitIdle(e->device);
    if (e->pool) vkDestroyCommandPool(e->device, e->pool, NULL);
    vkDestroyDevice(e->device, NULL);
  }
  if (e->messenger) {
    PFN_vkDestroyDebugUtilsMessengerEXT destroy =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(e->instance, "vkDestroyDebugUtilsMessengerEXT");
    if (destroy) destroy(e->instance, e->messenger, NULL);
  }
  if (e->instance) vkDestroyInstance(e->instance, NULL);
}

static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier memory = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  memory.srcAccessMask = src_access;
  memory.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &memory, 0, NULL, 0, NULL);
}

/* The engine records vkfRecordForward and vkfRecordBackward into its own command buffer with the
 * barriers vkflash.h asks for, submits it on its queue, and vkflash's results match the reference. */
static void adopted_cases(void) {
  Engine engine;
  VkfExternalDevice external = {.struct_size = sizeof(VkfExternalDevice)};
  VkfContextCreateInfo options = {.struct_size = sizeof(VkfContextCreateInfo)};
  VkfContext context = NULL;
  VkfDeviceInfo info = {.struct_size = sizeof(VkfDeviceInfo)};
  VkfAttentionParams params = {.struct_size = sizeof(VkfAttentionParams)};
  const VkfAttentionShape shape = {1, 2, 1, 5, 6, 16};
  const char* label = "recorded forward + backward float32 [B 1, Hq 2, Hkv 1, Nq 5, Nk 6, D 16] on an adopted device";
  HostTensor q, k, v, d_o;
  BackwardBuffers b;
  uint64_t forward_workspace = 0, backward_workspace = 0;
  VkDevice device = VK_NULL_HANDLE;

  memset(&b, 0, sizeof(b));
  params.shape = shape;
  q = random_tensor(q_elements(&shape), params.dtype, 51);
  k = random_tensor(kv_elements(&shape), params.dtype, 52);
  v = random_tensor(kv_elements(&shape), params.dtype, 53);
  d_o = random_tensor(q_elements(&shape), params.dtype, 54);
  if (!create_engine(&engine)) goto done;

  external.instance = engine.instance;
  external.physical_device = engine.physical;
  external.device = engine.device;
  external.queue = engine.queue;
  external.queue_family_index = engine.family;
  external.api_version = 0; /* Vulkan 1.1 */
  external.enabled = 0;     /* no float16 storage, no push descriptors */
  check_error(vkfAdoptDevice(NULL, &options, &context), VKF_ERROR_INVALID_ARGUMENT, "vkfAdoptDevice(NULL device)");
  if (!check_ok(vkfAdoptDevice(&external, &options, &context), "vkfAdoptDevice")) goto done;
  if (check_ok(vkfGetDevice(context, &device), "vkfGetDevice")) check(device == engine.device, "the context's VkDevice is the engine's");
  if (check_ok(vkfGetDeviceInfo(context, &info), "vkfGetDeviceInfo (adopted)"))
    check(!info.use_push_descriptors && !info.storage_buffer_16bit,
          "only what the engine enabled is used: no push descriptors, no 16-bit storage");
  check_ok(vkfForwardWorkspaceBytes(context, &params, &forward_workspace), "vkfForwardWorkspaceBytes");
  check_ok(vkfBackwardWorkspaceBytes(context, &params, &backward_workspace), "vkfBackwardWorkspaceBytes");
  /* One workspace serves both calls: a compute-to-compute barrier sits between them. */
  if (make_backward_buffers(context, &params,
                            forward_workspace > backward_workspace ? forward_workspace : backward_workspace, &q, &k, &v,
                            &d_o, &b)) {
    VkCommandBufferAllocateInfo alloc = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    VkCommandBufferBeginInfo begin = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VkSubmitInfo submit = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkfForwardBuffers forward = forward_views(&b);
    const VkfBackwardBuffers backward = backward_views(&b);
    int recorded;
    if (forward_workspace > 0) forward.workspace = vkfGetBufferView(b.workspace);
    alloc.commandPool = engine.pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    if (check(vkAllocateCommandBuffers(engine.device, &alloc, &cmd) == VK_SUCCESS, "engine: command buffer") &&
        check(vkBeginCommandBuffer(cmd, &begin) == VK_SUCCESS, "engine: vkBeginCommandBuffer")) {
      /* Inputs (uploaded by transfers) visible to compute reads; the outputs then barriered. */
      barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      recorded = check_ok(vkfRecordForward(context, cmd, &params, &forward), "vkfRecordForward into the engine's command buffer");
      barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      recorded = recorded && check_ok(vkfRecordBackward(context, cmd, &params, &backward),
                                      "vkfRecordBackward into the engine's command buffer");
      barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
              VK_ACCESS_TRANSFER_READ_BIT);
      submit.commandBufferCount = 1;
      submit.pCommandBuffers = &cmd;
      if (check(vkEndCommandBuffer(cmd) == VK_SUCCESS, "engine: vkEndCommandBuffer") && recorded &&
          check(vkQueueSubmit(engine.queue, 1, &submit, VK_NULL_HANDLE) == VK_SUCCESS &&
                    vkQueueWaitIdle(engine.queue) == VK_SUCCESS,
                "engine: submitted on its own queue and waited")) {
        float* o = (float*)checked_calloc(q.count, sizeof(float));
        double* ref_o = (double*)checked_calloc(q.count, sizeof(double));
        double* ref_lse = (double*)checked_calloc(lse_elements(&shape), sizeof(double));
        Problem problem;
        problem.shape = shape;
        problem.causal = 0;
        problem.scale = default_scale(&shape);
        problem.mask = NULL;
        reference_forward(&problem, q.values, k.values, v.values, ref_o, ref_lse);
        if (download_floats(context, b.o, VKF_DTYPE_FLOAT32, q.count, o)) {
          const double error = relative_error(o, ref_o, q.count);
          check(error <= forward_tolerance(VKF_DTYPE_FLOAT32), "%s: O relative error %.2e <= %.0e", label, error,
                forward_tolerance(VKF_DTYPE_FLOAT32));
        }
        check_gradients(context, label, &params, &b, &q, &k, &v, &d_o);
        free(o);
        free(ref_o);
        free(ref_lse);
      }
      vkFreeCommandBuffers(engine.device, engine.pool, 1, &cmd);
    }
  }
  destroy_backward_buffers(context, &b);
done:
  vkfDestroyContext(context);
  destroy_engine(&engine);
  free_tensor(&q);
  free_tensor(&k);
  free_tensor(&v);
  free_tensor(&d_o);
}

/* ---- main ------------------------------------------------------------------------------------ */

int main(void) {
  uint32_t major = 99, minor = 99, patch = 99;
  VkfTileOverrides tiles = {.struct_size = sizeof(VkfTileOverrides)};
  VkfContextCreateInfo create_info = {.struct_size = sizeof(VkfContextCreateInfo)};
  VkfDeviceInfo info = {.struct_size = sizeof(VkfDeviceInfo)};
  VkfContext context = NULL;

  vkfGetVersion(&major, &minor, &patch);
  check(major == VKFLASH_VERSION_MAJOR && minor == VKFLASH_VERSION_MINOR && patch == VKFLASH_VERSION_PATCH,
        "vkfGetVersion: %u.%u.%u, the header's %d.%d.%d", major, minor, patch, VKFLASH_VERSION_MAJOR,
        VKFLASH_VERSION_MINOR, VKFLASH_VERSION_PATCH);
  vkfGetVersion(NULL, NULL, NULL);

  error_cases();
  device_list_cases();
  bad_option_cases();

  create_info.enable_validation = VK_TRUE;
  create_info.message_callback = on_validation_message;
  create_info.tile_overrides = &tiles; /* all empty: the tables */
  if (check_ok(vkfCreateContext(&create_info, &context), "vkfCreateContext with validation")) {
    if (check_ok(vkfGetDeviceInfo(context, &info), "vkfGetDeviceInfo")) {
      check(info.name[0] != '\0' && info.api_version >= VK_API_VERSION_1_1 && info.shared_memory_bytes > 0 &&
                info.max_workgroup_invocations > 0 && info.usable_shared_memory_bytes > 0,
            "device %s (%s), driver %s, Vulkan %u.%u, %u bytes shared memory, subgroups %u (%u-%u), %s",
            info.name, vkfDeviceTypeName(info.type), info.driver, VK_API_VERSION_MAJOR(info.api_version),
            VK_API_VERSION_MINOR(info.api_version), info.shared_memory_bytes, info.subgroup_size,
            info.min_subgroup_size, info.max_subgroup_size, vkfCooperativeMatrixApiName(info.cooperative_matrix));
    }
    /* A caller built before subgroup_vote_in_compute was appended: the fields its size covers are
     * written, the appended one is left alone. */
    {
      VkfDeviceInfo older;
      memset(&older, 0, sizeof(older));
      older.struct_size = (uint32_t)offsetof(VkfDeviceInfo, subgroup_vote_in_compute);
      older.subgroup_vote_in_compute = 7;
      if (check_ok(vkfGetDeviceInfo(context, &older), "vkfGetDeviceInfo with the first layout's size"))
        check(older.use_decode_kernels == info.use_decode_kernels && strcmp(older.name, info.name) == 0 &&
                  older.subgroup_vote_in_compute == 7,
              "the first layout's fields written (decode kernels %u), the appended field untouched (%u)",
              older.use_decode_kernels, older.subgroup_vote_in_compute);
      check(!info.use_decode_kernels || info.subgroup_vote_in_compute, "the decode kernels run only with subgroup votes");
    }
    info.struct_size = 0;
    check_error(vkfGetDeviceInfo(context, &info), VKF_ERROR_INVALID_ARGUMENT, "vkfGetDeviceInfo, struct_size 0");
    info.struct_size = sizeof(VkfDeviceInfo);
    (void)vkfGetDeviceInfo(context, &info);
    context_cases(context, &info);
    vkfDestroyContext(context); /* also frees the buffer context_cases left alive */
  }

  adopted_cases();

  check(g_validation_messages == 0, "the validation layer reported %d message(s)", g_validation_messages);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  if (g_checks < 50) {
    printf("FAIL: too few checks ran\n");
    return 1;
  }
  return g_failures == 0 ? 0 : 1;
}
