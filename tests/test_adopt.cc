// An engine's own Vulkan objects: Context::Adopt, RecordForward into the engine's command
// buffer with the documented barriers, and nothing of the engine's destroyed by vkflash.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "reference_attention.h"
#include "support/attention_case.h"
#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

VKAPI_ATTR VkBool32 VKAPI_CALL OnMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                         VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                         void*) {
  RecordValidationMessage(severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? MessageSeverity::kError
                                                                                    : MessageSeverity::kWarning,
                          data->pMessage);
  return VK_FALSE;
}

// What a small engine would have: instance (validation on), device, queue, command pool, and a
// host-visible buffer of its own.
struct Engine {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t family = 0;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;

  explicit Engine(bool enable_16bit, VkDeviceSize buffer_bytes) {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_1;
    const char* layers[] = {"VK_LAYER_KHRONOS_validation"};
    const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkDebugUtilsMessengerCreateInfoEXT messenger_info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger_info.pfnUserCallback = OnMessage;
    VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = &sync;
    features.pNext = &messenger_info;
    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pNext = &features;
    info.pApplicationInfo = &app;
    info.enabledLayerCount = 1;
    info.ppEnabledLayerNames = layers;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
    REQUIRE(vkCreateInstance(&info, nullptr, &instance) == VK_SUCCESS);
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
    REQUIRE(create_messenger(instance, &messenger_info, nullptr, &messenger) == VK_SUCCESS);

    uint32_t count = 1;
    REQUIRE(vkEnumeratePhysicalDevices(instance, &count, &physical) >= 0);
    REQUIRE(count >= 1);
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
    std::vector<VkQueueFamilyProperties> props(families);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, props.data());
    while (family < families && !(props[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
    REQUIRE(family < families);

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue_info.queueFamilyIndex = family;
    queue_info.queueCount = 1;
    queue_info.pQueuePriorities = &priority;
    VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    storage16.storageBuffer16BitAccess = enable_16bit;
    VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    device_info.pNext = &storage16;
    device_info.queueCreateInfoCount = 1;
    device_info.pQueueCreateInfos = &queue_info;
    REQUIRE(vkCreateDevice(physical, &device_info, nullptr, &device) == VK_SUCCESS);
    vkGetDeviceQueue(device, family, 0, &queue);

    VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool_info.queueFamilyIndex = family;
    REQUIRE(vkCreateCommandPool(device, &pool_info, nullptr, &pool) == VK_SUCCESS);

    VkBufferCreateInfo buffer_info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    buffer_info.size = buffer_bytes;
    buffer_info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    REQUIRE(vkCreateBuffer(device, &buffer_info, nullptr, &buffer) == VK_SUCCESS);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, buffer, &req);
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(physical, &mem);
    uint32_t type = 0;
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    while (type < mem.memoryTypeCount && !((req.memoryTypeBits & (1u << type)) && (mem.memoryTypes[type].propertyFlags & want) == want)) ++type;
    REQUIRE(type < mem.memoryTypeCount);
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    REQUIRE(vkAllocateMemory(device, &alloc, nullptr, &memory) == VK_SUCCESS);
    REQUIRE(vkBindBufferMemory(device, buffer, memory, 0) == VK_SUCCESS);
    REQUIRE(vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &mapped) == VK_SUCCESS);
  }

  ~Engine() {
    vkDeviceWaitIdle(device);
    vkDestroyBuffer(device, buffer, nullptr);
    vkFreeMemory(device, memory, nullptr);
    vkDestroyCommandPool(device, pool, nullptr);
    vkDestroyDevice(device, nullptr);
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
    destroy(instance, messenger, nullptr);
    vkDestroyInstance(instance, nullptr);
  }

  ExternalDevice External(bool enable_16bit) const {
    ExternalDevice e;
    e.instance = instance;
    e.physical_device = physical;
    e.device = device;
    e.queue = queue;
    e.queue_family_index = family;
    e.api_version = VK_API_VERSION_1_1;
    e.enabled = enable_16bit ? kAdoptedStorageBuffer16Bit : 0u;  // and not VK_KHR_push_descriptor
    return e;
  }
};

}  // namespace

TEST_CASE("adopted device: the engine records vkflash into its own command buffer", "[adopt]") {
  AttentionParams params;
  params.shape = {1, 4, 2, 37, 52, 64};
  params.causal = true;
  const auto& s = params.shape;
  const VkDeviceSize q_bytes = s.q_elements() * 4, kv_bytes = s.kv_elements() * 4, lse_bytes = s.lse_elements() * 4;
  // One engine buffer, four tensors inside it (offsets multiple of 256, valid for any device).
  const VkDeviceSize k_off = 256 * ((q_bytes + 255) / 256), v_off = k_off + 256 * ((kv_bytes + 255) / 256),
                     o_off = v_off + 256 * ((kv_bytes + 255) / 256), lse_off = o_off + 256 * ((q_bytes + 255) / 256);
  Engine engine(/*enable_16bit=*/false, lse_off + lse_bytes);
  {
    auto adopted = Context::Adopt(engine.External(false));
    INFO(adopted.status().ToString());
    REQUIRE(adopted.ok());
    Context& context = **adopted;
    CHECK_FALSE(context.device_info().use_push_descriptors);

    const auto q = RandomValues(s.q_elements(), DataType::kFloat32, 1);
    const auto k = RandomValues(s.kv_elements(), DataType::kFloat32, 2);
    const auto v = RandomValues(s.kv_elements(), DataType::kFloat32, 3);
    auto* bytes = static_cast<uint8_t*>(engine.mapped);
    std::memcpy(bytes, q.data(), q_bytes);
    std::memcpy(bytes + k_off, k.data(), kv_bytes);
    std::memcpy(bytes + v_off, v.data(), kv_bytes);
    std::memset(bytes + o_off, 0xff, q_bytes);
    std::memset(bytes + lse_off, 0xff, lse_bytes);

    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = engine.pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cmd;
    REQUIRE(vkAllocateCommandBuffers(engine.device, &alloc, &cmd) == VK_SUCCESS);
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    REQUIRE(vkBeginCommandBuffer(cmd, &begin) == VK_SUCCESS);
    // The documented contract: inputs visible to compute reads before; outputs made visible after.
    VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    before.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT;
    before.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
    const VkBuffer b = engine.buffer;
    ForwardBuffers buffers{{b, 0, q_bytes}, {b, k_off, kv_bytes}, {b, v_off, kv_bytes}, {b, o_off, q_bytes}, {b, lse_off, lse_bytes}};
    const Status recorded = context.RecordForward(cmd, params, buffers);
    INFO(recorded.ToString());
    REQUIRE(recorded.ok());
    VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    after.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    after.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after, 0, nullptr, 0, nullptr);
    REQUIRE(vkEndCommandBuffer(cmd) == VK_SUCCESS);
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd;
    REQUIRE(vkQueueSubmit(engine.queue, 1, &submit, VK_NULL_HANDLE) == VK_SUCCESS);
    REQUIRE(vkQueueWaitIdle(engine.queue) == VK_SUCCESS);

    std::vector<float> o(s.q_elements()), lse(s.lse_elements());
    std::memcpy(o.data(), bytes + o_off, q_bytes);
    std::memcpy(lse.data(), bytes + lse_off, lse_bytes);
    const auto reference = tools::ReferenceAttentionForward(params, q, k, v);
    CHECK(tools::RelativeError(o, reference.o) <= ForwardTolerance(DataType::kFloat32));
    CHECK(tools::RelativeError(lse, reference.lse) <= ForwardTolerance(DataType::kFloat32));

    // float16 needs storageBuffer16BitAccess, which this engine did not enable.
    AttentionParams f16 = params;
    f16.dtype = DataType::kFloat16;
    CHECK(context.ChooseForwardKernel(f16).status().code() == ErrorCode::kUnsupported);
    vkFreeCommandBuffers(engine.device, engine.pool, 1, &cmd);
    context.ForgetBuffer(engine.buffer);  // the engine is about to destroy it
  }
  // The Context is gone; the engine's objects must still work (the destructor above uses them).
  RequireNoValidationMessages();
}
