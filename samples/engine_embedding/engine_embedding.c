/* A game engine that is not vkflash's: it owns its Vulkan instance, device, queue, command
 * buffers, buffers and memory, and runs an offscreen frame loop with two frames in flight. Each
 * frame, in one command buffer of its own, it records a simulation pass that writes Q, K and V,
 * vkflash's attention forward (C API, on the adopted device) and a consumer pass that copies O and
 * LSE out; when the frame's fence signals, the host checks them against a float64 reference.
 *
 * VKFLASH_VALIDATION=1 turns on VK_LAYER_KHRONOS_validation with synchronization validation, its
 * messages counted by the engine's own debug messenger. Exit 0 only if every frame matched and
 * the layer said nothing. */
#include <vkflash/vkflash.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The attention every frame runs: float32, causal, grouped-query (two query heads per KV head). */
enum { B = 1, HQ = 4, HKV = 2, NQ = 48, NK = 80, D = 32 };
enum { Q_ELEMENTS = B * HQ * NQ * D, KV_ELEMENTS = B * HKV * NK * D, ROWS = B * HQ * NQ };
typedef char every_query_row_sees_a_key[NK >= NQ ? 1 : -1]; /* what the reference below assumes */
typedef char fits_one_vkCmdUpdateBuffer[Q_ELEMENTS * 4 <= 65536 && KV_ELEMENTS * 4 <= 65536 ? 1 : -1];

enum { FRAMES_IN_FLIGHT = 2, FRAME_COUNT = 6 };
static const double kTolerance = 2e-4;                   /* float32 relative error (docs/design.md) */
static const uint64_t kFenceTimeoutNs = 120000000000ull; /* lavapipe under validation is slow, not this slow */

/* The per-frame device buffers. */
enum { Q, K, V, O, LSE, WORKSPACE, TENSOR_COUNT };

typedef struct Frame {
  VkCommandBuffer cmd;
  VkFence fence;
  VkBuffer buffers[TENSOR_COUNT];
  VkDeviceMemory memory; /* device-local, every buffer above bound at its own offset */
  VkBuffer readback;     /* host-visible: O, then LSE */
  VkDeviceMemory readback_memory;
  void* mapped;
  float q[Q_ELEMENTS], k[KV_ELEMENTS], v[KV_ELEMENTS]; /* what the simulation wrote, for the check */
  int frame;                                           /* the frame in flight in this slot, or -1 */
} Frame;

typedef struct Engine {
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice physical;
  VkDevice device;
  VkQueue queue;
  uint32_t family;
  VkfAdoptedDeviceFeatureFlags enabled; /* what the device was created with that vkflash may use */
  VkCommandPool pool;
  VkPhysicalDeviceMemoryProperties memory_properties;
  VkDeviceSize bytes[TENSOR_COUNT];
  Frame frames[FRAMES_IN_FLIGHT];
  VkfContext vkflash;
} Engine;

static int g_validation_messages = 0;

static int vk_ok(VkResult result, const char* what) {
  if (result == VK_SUCCESS) return 1;
  fprintf(stderr, "engine: %s failed: VkResult %d\n", what, (int)result);
  return 0;
}

static int vkf_ok(VkfResult result, const char* what) {
  if (result == VKF_SUCCESS) return 1;
  fprintf(stderr, "engine: %s failed (%s): %s\n", what, vkfResultName(result), vkfGetLastErrorMessage());
  return 0;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                            VkDebugUtilsMessageTypeFlagsEXT types,
                                                            const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                            void* user) {
  (void)types;
  (void)user;
  ++g_validation_messages;
  fprintf(stderr, "validation %s: %s\n", severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
          data && data->pMessage ? data->pMessage : "(no message)");
  return VK_FALSE;
}

/* Vulkan 1.1 (vkflash's minimum; VkfExternalDevice.api_version says the same). */
static int create_instance(Engine* e, int validation) {
  const char* layer = "VK_LAYER_KHRONOS_validation";
  const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
  const VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  const VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity =
          VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = on_validation_message};
  /* The messenger in pNext also hears vkCreateInstance and vkDestroyInstance. */
  const VkValidationFeaturesEXT features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                            .pNext = &messenger_info,
                                            .enabledValidationFeatureCount = 1,
                                            .pEnabledValidationFeatures = &sync};
  const VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                 .pApplicationName = "vkflash engine embedding sample",
                                 .apiVersion = VK_API_VERSION_1_1};
  const VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                     .pNext = validation ? &features : NULL,
                                     .pApplicationInfo = &app,
                                     .enabledLayerCount = validation ? 1 : 0,
                                     .ppEnabledLayerNames = &layer,
                                     .enabledExtensionCount = validation ? 2 : 0,
                                     .ppEnabledExtensionNames = extensions};
  PFN_vkCreateDebugUtilsMessengerEXT create_messenger;
  const VkResult result = vkCreateInstance(&info, NULL, &e->instance);
  if (result == VK_ERROR_LAYER_NOT_PRESENT || result == VK_ERROR_EXTENSION_NOT_PRESENT)
    fprintf(stderr, "engine: VKFLASH_VALIDATION=1 needs VK_LAYER_KHRONOS_validation, which is not installed\n");
  if (!vk_ok(result, "vkCreateInstance") || !validation) return result == VK_SUCCESS;
  create_messenger =
      (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(e->instance, "vkCreateDebugUtilsMessengerEXT");
  return vk_ok(create_messenger ? create_messenger(e->instance, &messenger_info, NULL, &e->messenger)
                                : VK_ERROR_EXTENSION_NOT_PRESENT,
               "vkCreateDebugUtilsMessengerEXT");
}

/* The first device with Vulkan 1.1 and a compute queue, a discrete GPU before any other. */
static int pick_device(Engine* e) {
  VkPhysicalDevice devices[16];
  uint32_t count = 16, i, family, family_count;
  int best = 0;
  VkResult result = vkEnumeratePhysicalDevices(e->instance, &count, devices);
  if (result != VK_SUCCESS && result != VK_INCOMPLETE) return vk_ok(result, "vkEnumeratePhysicalDevices");
  for (i = 0; i < count; ++i) {
    VkPhysicalDeviceProperties properties;
    VkQueueFamilyProperties families[32];
    int score;
    vkGetPhysicalDeviceProperties(devices[i], &properties);
    family_count = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &family_count, families);
    for (family = 0; family < family_count && !(families[family].queueFlags & VK_QUEUE_COMPUTE_BIT); ++family) {
    }
    if (properties.apiVersion < VK_API_VERSION_1_1 || family == family_count) continue;
    score = properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? 2 : 1;
    if (score > best) {
      best = score;
      e->physical = devices[i];
      e->family = family;
    }
  }
  if (best == 0) fprintf(stderr, "engine: no Vulkan 1.1 device with a compute queue\n");
  return best > 0;
}

/* The engine's device: one compute queue, and of what vkflash can use (16-bit storage for float16
 * tensors, push descriptors) what the device has. e->enabled records exactly that for vkflash. */
static int create_device(Engine* e) {
  static VkExtensionProperties extensions[1024];
  uint32_t count = 1024, i;
  const char* push_descriptor = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
  const float priority = 1.0f;
  VkPhysicalDevice16BitStorageFeatures offered = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 query = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &offered};
  VkPhysicalDevice16BitStorageFeatures storage16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  /* No Vulkan 1.0 feature is needed. */
  const VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                              .pNext = &storage16};
  const VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                              .queueFamilyIndex = e->family,
                                              .queueCount = 1,
                                              .pQueuePriorities = &priority};
  VkDeviceCreateInfo device_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                    .pNext = &features,
                                    .queueCreateInfoCount = 1,
                                    .pQueueCreateInfos = &queue_info,
                                    .ppEnabledExtensionNames = &push_descriptor};
  /* One command buffer per frame slot, reset and re-recorded every time the slot comes round. */
  const VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                             .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                             .queueFamilyIndex = e->family};

  vkGetPhysicalDeviceFeatures2(e->physical, &query);
  storage16.storageBuffer16BitAccess = offered.storageBuffer16BitAccess;
  if (offered.storageBuffer16BitAccess) e->enabled |= VKF_ADOPTED_STORAGE_BUFFER_16BIT_BIT;
  if (vkEnumerateDeviceExtensionProperties(e->physical, NULL, &count, extensions) < 0) count = 0;
  for (i = 0; i < count; ++i)
    if (strcmp(extensions[i].extensionName, push_descriptor) == 0) e->enabled |= VKF_ADOPTED_PUSH_DESCRIPTOR_BIT;
  device_info.enabledExtensionCount = (e->enabled & VKF_ADOPTED_PUSH_DESCRIPTOR_BIT) ? 1 : 0;

  if (!vk_ok(vkCreateDevice(e->physical, &device_info, NULL, &e->device), "vkCreateDevice")) return 0;
  vkGetDeviceQueue(e->device, e->family, 0, &e->queue);
  vkGetPhysicalDeviceMemoryProperties(e->physical, &e->memory_properties);
  return vk_ok(vkCreateCommandPool(e->device, &pool_info, NULL, &e->pool), "vkCreateCommandPool");
}

/* A memory type of type_bits with `preferred`, else any of type_bits with `required`. */
static int allocate(Engine* e, uint32_t type_bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                    VkDeviceSize bytes, VkDeviceMemory* memory) {
  VkMemoryAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = bytes};
  int pass;
  uint32_t i;
  for (pass = 0; pass < 2; ++pass)
    for (i = 0; i < e->memory_properties.memoryTypeCount; ++i) {
      const VkMemoryPropertyFlags wanted = pass == 0 ? required | preferred : required;
      if ((type_bits & (1u << i)) && (e->memory_properties.memoryTypes[i].propertyFlags & wanted) == wanted) {
        info.memoryTypeIndex = i;
        return vk_ok(vkAllocateMemory(e->device, &info, NULL, memory), "vkAllocateMemory");
      }
    }
  fprintf(stderr, "engine: no suitable memory type\n");
  return 0;
}

/* One frame's command buffer, fence, device buffers (one allocation) and readback buffer. */
static int create_frame(Engine* e, Frame* f) {
  const VkCommandBufferAllocateInfo cmd_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                                .commandPool = e->pool,
                                                .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                                .commandBufferCount = 1};
  const VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  /* vkflash reads and writes them as storage buffers; the engine's passes fill and copy them. */
  VkBufferCreateInfo buffer_info = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkMemoryRequirements requirements;
  VkDeviceSize offsets[TENSOR_COUNT], total = 0;
  uint32_t type_bits = ~0u;
  int t;

  f->frame = -1;
  if (!vk_ok(vkAllocateCommandBuffers(e->device, &cmd_info, &f->cmd), "vkAllocateCommandBuffers") ||
      !vk_ok(vkCreateFence(e->device, &fence_info, NULL, &f->fence), "vkCreateFence"))
    return 0;
  for (t = 0; t < TENSOR_COUNT; ++t) {
    if (e->bytes[t] == 0) continue; /* no workspace where vkflash needs none */
    buffer_info.size = e->bytes[t];
    if (!vk_ok(vkCreateBuffer(e->device, &buffer_info, NULL, &f->buffers[t]), "vkCreateBuffer")) return 0;
    vkGetBufferMemoryRequirements(e->device, f->buffers[t], &requirements);
    offsets[t] = (total + requirements.alignment - 1) / requirements.alignment * requirements.alignment;
    total = offsets[t] + requirements.size;
    type_bits &= requirements.memoryTypeBits;
  }
  if (!allocate(e, type_bits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, total, &f->memory)) return 0;
  for (t = 0; t < TENSOR_COUNT; ++t)
    if (f->buffers[t] &&
        !vk_ok(vkBindBufferMemory(e->device, f->buffers[t], f->memory, offsets[t]), "vkBindBufferMemory"))
      return 0;

  buffer_info.size = e->bytes[O] + e->bytes[LSE];
  buffer_info.usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (!vk_ok(vkCreateBuffer(e->device, &buffer_info, NULL, &f->readback), "vkCreateBuffer (readback)")) return 0;
  vkGetBufferMemoryRequirements(e->device, f->readback, &requirements);
  return allocate(e, requirements.memoryTypeBits,
                  VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                  VK_MEMORY_PROPERTY_HOST_CACHED_BIT, requirements.size, &f->readback_memory) &&
         vk_ok(vkBindBufferMemory(e->device, f->readback, f->readback_memory, 0), "vkBindBufferMemory (readback)") &&
         vk_ok(vkMapMemory(e->device, f->readback_memory, 0, VK_WHOLE_SIZE, 0, &f->mapped), "vkMapMemory");
}

/* The frame's inputs: deterministic pseudo-random values in [-1, 1), different every frame. */
static void simulate(Frame* f, int frame) {
  float* const tensors[3] = {f->q, f->k, f->v};
  const int counts[3] = {Q_ELEMENTS, KV_ELEMENTS, KV_ELEMENTS};
  int t, i;
  for (t = 0; t < 3; ++t) {
    uint32_t state = (uint32_t)(frame * 3 + t + 1) * 2654435761u;
    for (i = 0; i < counts[t]; ++i) {
      state ^= state << 13; /* xorshift32 */
      state ^= state >> 17;
      state ^= state << 5;
      tensors[t][i] = (float)((state >> 8) * (2.0 / 16777216.0) - 1.0);
    }
  }
}

static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  const VkMemoryBarrier memory = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src_access, .dstAccessMask = dst_access};
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &memory, 0, NULL, 0, NULL);
}

/* Records the whole frame into the slot's command buffer and submits it with the slot's fence. */
static int record_frame(Engine* e, Frame* f, int frame, const VkfAttentionParams* params) {
  const VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                          .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  const VkSubmitInfo submit = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &f->cmd};
  VkfForwardBuffers buffers = {.struct_size = sizeof(VkfForwardBuffers)};
  VkfBufferView* const views[TENSOR_COUNT] = {&buffers.q, &buffers.k,   &buffers.v,
                                              &buffers.o, &buffers.lse, &buffers.workspace};
  const VkBufferCopy o_copy = {0, 0, e->bytes[O]}, lse_copy = {0, e->bytes[O], e->bytes[LSE]};
  int t;

  simulate(f, frame);
  if (!vk_ok(vkResetCommandBuffer(f->cmd, 0), "vkResetCommandBuffer") ||
      !vk_ok(vkBeginCommandBuffer(f->cmd, &begin), "vkBeginCommandBuffer"))
    return 0;

  /* (1) Simulation pass: this frame's Q, K, V (vkCmdUpdateBuffer: a real engine's shaders or
   * staging copies would do). O and LSE are filled with NaN, so that a value vkflash did not write
   * this frame cannot pass the check. */
  vkCmdUpdateBuffer(f->cmd, f->buffers[Q], 0, e->bytes[Q], f->q);
  vkCmdUpdateBuffer(f->cmd, f->buffers[K], 0, e->bytes[K], f->k);
  vkCmdUpdateBuffer(f->cmd, f->buffers[V], 0, e->bytes[V], f->v);
  vkCmdFillBuffer(f->cmd, f->buffers[O], 0, VK_WHOLE_SIZE, 0x7fc00000u);
  vkCmdFillBuffer(f->cmd, f->buffers[LSE], 0, VK_WHOLE_SIZE, 0x7fc00000u);

  /* (2) vkflash.h: the inputs' writes visible to COMPUTE_SHADER reads. SHADER_WRITE too: vkflash's
   * writes to O and LSE must land after the fills (write after write). */
  barrier(f->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);

  /* (3) vkflash's forward, into the engine's command buffer. Each slot has its own workspace:
   * vkflash.h asks for a compute-to-compute barrier between two calls that share one, and
   * nothing orders the two frames in flight (a workspace each also lets them overlap). */
  for (t = 0; t < TENSOR_COUNT; ++t) /* the workspace stays a zero view where vkflash needs none */
    if (f->buffers[t] != VK_NULL_HANDLE) *views[t] = (VkfBufferView){f->buffers[t], 0, e->bytes[t]};
  if (!vkf_ok(vkfRecordForward(e->vkflash, f->cmd, params, &buffers), "vkfRecordForward")) return 0;

  /* (4) vkflash.h: O and LSE are COMPUTE_SHADER SHADER_WRITEs; the consumer pass reads them by transfer. */
  barrier(f->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_TRANSFER_READ_BIT);

  /* (5) Consumer pass: O and LSE into host-visible memory, made visible to the host's reads
   * (a fence alone does not make device writes visible to the host). */
  vkCmdCopyBuffer(f->cmd, f->buffers[O], f->readback, 1, &o_copy);
  vkCmdCopyBuffer(f->cmd, f->buffers[LSE], f->readback, 1, &lse_copy);
  barrier(f->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
  if (!vk_ok(vkEndCommandBuffer(f->cmd), "vkEndCommandBuffer")) return 0;

  if (!vk_ok(vkQueueSubmit(e->queue, 1, &submit, f->fence), "vkQueueSubmit")) return 0;
  f->frame = frame;
  return 1;
}

/* float64 attention: causal bottom-right aligned (row i sees key j iff j <= i + NK - NQ; with
 * NK >= NQ every row sees a key), query head h reads KV head h / (HQ / HKV), scale 1/sqrt(D); LSE
 * is the log-sum-exp of the scaled scores. */
static void reference(const Frame* f, double* o, double* lse) {
  const double scale = 1.0 / sqrt((double)D);
  double scores[NK];
  int b, h, i, j, d;
  for (b = 0; b < B; ++b)
    for (h = 0; h < HQ; ++h)
      for (i = 0; i < NQ; ++i) {
        const int row = (b * HQ + h) * NQ + i, last = i + NK - NQ;
        const float* q = f->q + (size_t)row * D;
        const size_t kv = (size_t)(b * HKV + h / (HQ / HKV)) * NK * D;
        double max = -INFINITY, sum = 0.0;
        for (d = 0; d < D; ++d) o[row * D + d] = 0.0;
        for (j = 0; j <= last; ++j) {
          scores[j] = 0.0;
          for (d = 0; d < D; ++d) scores[j] += (double)q[d] * f->k[kv + (size_t)j * D + d];
          scores[j] *= scale;
          if (scores[j] > max) max = scores[j];
        }
        for (j = 0; j <= last; ++j) {
          const double w = exp(scores[j] - max);
          sum += w;
          for (d = 0; d < D; ++d) o[row * D + d] += w * f->v[kv + (size_t)j * D + d];
        }
        for (d = 0; d < D; ++d) o[row * D + d] /= sum;
        lse[row] = max + log(sum);
      }
}

/* ||actual - expected|| / ||expected||, infinite where a value is not finite (the NaN fill left). */
static double relative_error(const float* actual, const double* expected, int count) {
  double diff = 0.0, norm = 0.0;
  int i;
  for (i = 0; i < count; ++i) {
    if (!isfinite(actual[i])) return INFINITY;
    diff += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}

/* Waits for the slot's frame and checks it: 1 matched, 0 wrong, -1 a Vulkan failure. */
static int finish_frame(Engine* e, Frame* f) {
  static double ref_o[Q_ELEMENTS], ref_lse[ROWS];
  const float* o = (const float*)f->mapped;
  const float* lse = (const float*)((const char*)f->mapped + e->bytes[O]);
  double o_error, lse_error;
  int matched;
  const VkResult waited = vkWaitForFences(e->device, 1, &f->fence, VK_TRUE, kFenceTimeoutNs);
  if (waited == VK_TIMEOUT)
    fprintf(stderr, "engine: frame %d did not finish in %.0f s\n", f->frame, kFenceTimeoutNs * 1e-9);
  if (!vk_ok(waited, "vkWaitForFences") || !vk_ok(vkResetFences(e->device, 1, &f->fence), "vkResetFences")) return -1;
  reference(f, ref_o, ref_lse);
  o_error = relative_error(o, ref_o, Q_ELEMENTS);
  lse_error = relative_error(lse, ref_lse, ROWS);
  matched = o_error <= kTolerance && lse_error <= kTolerance;
  printf("frame %d: O error %.1e, LSE error %.1e, %s\n", f->frame, o_error, lse_error, matched ? "ok" : "WRONG");
  fflush(stdout);
  f->frame = -1;
  return matched;
}

/* In reverse order of creation; vkflash before the device it was given. */
static void destroy_engine(Engine* e) {
  int i, t;
  if (e->device) (void)vkDeviceWaitIdle(e->device); /* nothing may be pending when its buffers go */
  /* vkflash's pipelines (and, without push descriptors, its descriptor sets naming our buffers:
   * vkfForgetBuffer would be needed before destroying one while the context lives) go first. */
  vkfDestroyContext(e->vkflash);
  if (e->device) {
    for (i = 0; i < FRAMES_IN_FLIGHT; ++i) {
      Frame* f = &e->frames[i];
      for (t = 0; t < TENSOR_COUNT; ++t) vkDestroyBuffer(e->device, f->buffers[t], NULL);
      vkFreeMemory(e->device, f->memory, NULL);
      vkDestroyBuffer(e->device, f->readback, NULL);
      vkFreeMemory(e->device, f->readback_memory, NULL); /* unmaps it */
      vkDestroyFence(e->device, f->fence, NULL);
    }
    vkDestroyCommandPool(e->device, e->pool, NULL); /* and the frames' command buffers */
    vkDestroyDevice(e->device, NULL);
  }
  if (e->messenger) {
    PFN_vkDestroyDebugUtilsMessengerEXT destroy =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(e->instance, "vkDestroyDebugUtilsMessengerEXT");
    if (destroy) destroy(e->instance, e->messenger, NULL);
  }
  if (e->instance) vkDestroyInstance(e->instance, NULL);
}

int main(void) {
  static Engine engine; /* static: the frames hold their inputs (zero-initialised handles) */
  Engine* e = &engine;
  const char* validation_env = getenv("VKFLASH_VALIDATION");
  const int validation = validation_env != NULL && strcmp(validation_env, "1") == 0;
  VkfAttentionParams params = {
      .struct_size = sizeof(VkfAttentionParams), .dtype = VKF_DTYPE_FLOAT32, .causal = VK_TRUE};
  VkfDeviceInfo info = {.struct_size = sizeof(VkfDeviceInfo)};
  VkfKernelChoice kernel = {.struct_size = sizeof(VkfKernelChoice)};
  uint64_t workspace = 0;
  int frame, matched = 0, i, ready;
  const VkfAttentionShape shape = {B, HQ, HKV, NQ, NK, D};

  params.shape = shape; /* scale unset: 1/sqrt(D) */
  ready = create_instance(e, validation) && pick_device(e) && create_device(e);
  if (ready) {
    /* vkflash on the engine's objects: it never destroys them, and uses only what `enabled` names.
     * The queue serves vkflash's synchronous calls and start-up probes only. */
    const VkfExternalDevice external = {.struct_size = sizeof(VkfExternalDevice),
                                        .instance = e->instance,
                                        .physical_device = e->physical,
                                        .device = e->device,
                                        .queue = e->queue,
                                        .queue_family_index = e->family,
                                        .api_version = VK_API_VERSION_1_1,
                                        .enabled = e->enabled};
    ready = vkf_ok(vkfAdoptDevice(&external, NULL, &e->vkflash), "vkfAdoptDevice") &&
            vkf_ok(vkfGetDeviceInfo(e->vkflash, &info), "vkfGetDeviceInfo") &&
            vkf_ok(vkfChooseForwardKernel(e->vkflash, &params, &kernel), "vkfChooseForwardKernel") &&
            vkf_ok(vkfForwardWorkspaceBytes(e->vkflash, &params, &workspace), "vkfForwardWorkspaceBytes");
  }
  if (ready) {
    printf("engine: %s, queue family %u, enabled: 16-bit storage %s, push descriptors %s%s\n", info.name, e->family,
           e->enabled & VKF_ADOPTED_STORAGE_BUFFER_16BIT_BIT ? "yes" : "no",
           e->enabled & VKF_ADOPTED_PUSH_DESCRIPTOR_BIT ? "yes" : "no", validation ? "; validation on" : "");
    printf("vkflash: kernel %s (%s), push descriptors %s, workspace %llu bytes per frame, %d frames in flight\n",
           kernel.kernel, kernel.family, info.use_push_descriptors ? "used" : "not used", (unsigned long long)workspace,
           FRAMES_IN_FLIGHT);
    e->bytes[Q] = sizeof(float) * Q_ELEMENTS;
    e->bytes[K] = e->bytes[V] = sizeof(float) * KV_ELEMENTS;
    e->bytes[O] = sizeof(float) * Q_ELEMENTS;
    e->bytes[LSE] = sizeof(float) * ROWS;
    e->bytes[WORKSPACE] = workspace;
    for (i = 0; i < FRAMES_IN_FLIGHT && ready; ++i) ready = create_frame(e, &e->frames[i]);
  }
  /* The frame loop: a slot is re-recorded only after its previous frame's fence signalled and
   * that frame was checked; the last iterations only drain the slots. */
  for (frame = 0; ready && frame < FRAME_COUNT + FRAMES_IN_FLIGHT; ++frame) {
    Frame* f = &e->frames[frame % FRAMES_IN_FLIGHT];
    if (f->frame >= 0) {
      const int result = finish_frame(e, f);
      if (result < 0) break;
      matched += result;
    }
    if (frame < FRAME_COUNT && !record_frame(e, f, frame, &params)) break;
  }
  destroy_engine(e);
  if (validation) printf("validation layer: %d message(s)\n", g_validation_messages);
  printf("%d of %d frames matched the reference\n", matched, FRAME_COUNT);
  return matched == FRAME_COUNT && g_validation_messages == 0 ? 0 : 1;
}
