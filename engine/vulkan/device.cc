#include "vulkan/device.h"

#include <vector>

#include "util/status_macros.h"
#include "util/vk_check.h"
#include "vulkan/cooperative_matrix_caps.h"
#include "vulkan/device_caps.h"
#include "vulkan/pipeline_statistics.h"

namespace vkflash::vk {

Result<std::unique_ptr<Device>> Device::Create(VkPhysicalDevice physical, const DeviceInfo& info,
                                               bool capture_pipeline_statistics) {
  auto device = std::unique_ptr<Device>(new Device());
  device->physical_ = physical;
  device->owned_ = true;
  if (!FindComputeQueueFamily(physical, &device->queue_family_)) {
    return Status::Error(ErrorCode::kUnsupported, "device '" + info.name + "' has no compute queue");
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = device->queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;

  std::vector<const char*> extensions;
  if (info.use_push_descriptors) extensions.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);

  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  storage16.storageBuffer16BitAccess = info.storage_buffer_16bit ? VK_TRUE : VK_FALSE;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &storage16;

  // Tensor-core kernels: the extension with its feature, float16 arithmetic and the Vulkan memory
  // model (cooperative-matrix SPIR-V declares it). ProbeCooperativeMatrix checked all of them.
  VkPhysicalDeviceCooperativeMatrixFeaturesNV nv_matrix{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  CooperativeMatrixFeaturesKhr khr_matrix{kCooperativeMatrixFeaturesKhrType};
  VkPhysicalDeviceShaderFloat16Int8Features float16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  CooperativeMatrix2FeaturesNv nv_matrix2{kCooperativeMatrix2FeaturesNvType};
  VkPhysicalDeviceMaintenance4Features maintenance4{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES};
  maintenance4.maintenance4 = VK_TRUE;
  if (info.use_float16_arithmetic) {  // the scalar forward's float16 products (Vulkan 1.2 core)
    float16.shaderFloat16 = VK_TRUE;
    float16.pNext = storage16.pNext;
    storage16.pNext = &float16;
  }
  if (info.cooperative_matrix != CooperativeMatrixApi::kNone || info.use_cooperative_matrix2) {
    float16.shaderFloat16 = VK_TRUE;
    memory_model.vulkanMemoryModel = VK_TRUE;
    storage16.pNext = &float16;
    float16.pNext = &memory_model;
    void** tail = &memory_model.pNext;
    if (info.cooperative_matrix == CooperativeMatrixApi::kNv) {
      extensions.push_back(kNvCooperativeMatrixExtension);
      nv_matrix.cooperativeMatrix = VK_TRUE;
      *tail = &nv_matrix;
      tail = &nv_matrix.pNext;
    }
    // VK_NV_cooperative_matrix2 builds on VK_KHR_cooperative_matrix.
    if (info.cooperative_matrix == CooperativeMatrixApi::kKhr || info.use_cooperative_matrix2) {
      extensions.push_back(kKhrCooperativeMatrixExtension);
      khr_matrix.cooperativeMatrix = VK_TRUE;
      *tail = &khr_matrix;
      tail = &khr_matrix.pNext;
    }
    if (info.use_cooperative_matrix2) {
      extensions.push_back(kNvCooperativeMatrix2Extension);
      RequestCooperativeMatrix2Features(&nv_matrix2);
      *tail = &nv_matrix2;
      nv_matrix2.pNext = &maintenance4;  // SPIR-V 1.6's LocalSizeId (workgroup size as a constant)
    }
  }

  // Atomic dQ of backward calls with deterministic = false.
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
  if (info.use_float32_atomic_add) {
    extensions.push_back(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
    atomic_float.shaderBufferFloat32AtomicAdd = VK_TRUE;
    atomic_float.pNext = features.pNext;
    features.pNext = &atomic_float;
  }

  // Tuning aid (vulkan/pipeline_statistics.h).
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable_info{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  if (capture_pipeline_statistics && HasDeviceExtension(physical, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    executable_info.pipelineExecutableInfo = VK_TRUE;
    executable_info.pNext = features.pNext;
    features.pNext = &executable_info;
    device->pipeline_statistics_ = true;
  }

  VkDeviceCreateInfo create_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  create_info.pNext = &features;
  create_info.queueCreateInfoCount = 1;
  create_info.pQueueCreateInfos = &queue_info;
  create_info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  create_info.ppEnabledExtensionNames = extensions.data();
  VKF_VK_RETURN_IF_ERROR(vkCreateDevice(physical, &create_info, nullptr, &device->device_), "vkCreateDevice");
  vkGetDeviceQueue(device->device_, device->queue_family_, 0, &device->queue_);
  device->ReadMemoryLimits();
  device->max_buffer_bytes_ = info.max_buffer_size;
  VKF_RETURN_IF_ERROR(device->LoadFunctions(info.use_push_descriptors));
  return device;
}

Result<std::unique_ptr<Device>> Device::Adopt(const ExternalDevice& external, const DeviceInfo& info) {
  if (external.instance == VK_NULL_HANDLE || external.physical_device == VK_NULL_HANDLE ||
      external.device == VK_NULL_HANDLE || external.queue == VK_NULL_HANDLE) {
    return Status::Error(ErrorCode::kInvalidArgument,
                         "ExternalDevice needs instance, physical_device, device and queue");
  }
  auto device = std::unique_ptr<Device>(new Device());
  device->physical_ = external.physical_device;
  device->device_ = external.device;
  device->queue_ = external.queue;
  device->queue_family_ = external.queue_family_index;
  device->owned_ = false;
  device->ReadMemoryLimits();
  device->max_buffer_bytes_ = info.max_buffer_size;
  VKF_RETURN_IF_ERROR(device->LoadFunctions(info.use_push_descriptors));
  return device;
}

void Device::ReadMemoryLimits() {
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_properties_);
  VkPhysicalDeviceMaintenance3Properties maintenance3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  properties.pNext = &maintenance3;
  vkGetPhysicalDeviceProperties2(physical_, &properties);  // Vulkan 1.1, which vkflash requires
  max_allocation_bytes_ = maintenance3.maxMemoryAllocationSize;
}

Status Device::LoadFunctions(bool use_push_descriptors) {
  if (!use_push_descriptors) return Status::Ok();
  push_with_template_ = reinterpret_cast<PFN_vkCmdPushDescriptorSetWithTemplateKHR>(
      vkGetDeviceProcAddr(device_, "vkCmdPushDescriptorSetWithTemplateKHR"));
  if (push_with_template_ == nullptr) {
    return Status::Error(ErrorCode::kUnsupported,
                         "vkCmdPushDescriptorSetWithTemplateKHR not found: was VK_KHR_push_descriptor enabled?");
  }
  return Status::Ok();
}

void Device::OnAllocate(uint64_t bytes) const {
  const uint64_t now = allocated_bytes_ += bytes;
  uint64_t peak = peak_allocated_bytes_;
  while (now > peak && !peak_allocated_bytes_.compare_exchange_weak(peak, now)) {
  }
}

Device::~Device() {
  if (owned_ && device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    vkDestroyDevice(device_, nullptr);
  }
}

}  // namespace vkflash::vk
