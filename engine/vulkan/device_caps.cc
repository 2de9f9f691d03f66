#include "vulkan/device_caps.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "vulkan/cooperative_matrix_caps.h"

namespace vkflash::vk {

bool HasDeviceExtension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> extensions(count);
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data()) < 0) return false;
  for (const auto& extension : extensions)
    if (std::strcmp(extension.extensionName, name) == 0) return true;
  return false;
}

bool FindComputeQueueFamily(VkPhysicalDevice device, uint32_t* family) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  int best = -1;
  for (uint32_t i = 0; i < count; ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    const bool compute_only = !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT);
    if (best < 0 || (compute_only && (families[best].queueFlags & VK_QUEUE_GRAPHICS_BIT))) best = int(i);
  }
  if (best < 0) return false;
  *family = uint32_t(best);
  return true;
}

DeviceInfo ProbeDevice(VkInstance instance, uint32_t instance_api_version, VkPhysicalDevice device, uint32_t index) {
  DeviceInfo info;
  info.index = index;
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  for (uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      info.device_local_bytes = std::max<uint64_t>(info.device_local_bytes, memory.memoryHeaps[h].size);
    }
  }

  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlPropertiesEXT size_control{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  properties.pNext = &subgroup;

  VkPhysicalDeviceProperties basic;
  vkGetPhysicalDeviceProperties(device, &basic);
  // A core version's physical-device structs need both the device and the instance at that version.
  const uint32_t core_version = std::min(instance_api_version, basic.apiVersion);
  const bool has_size_control = core_version >= VK_API_VERSION_1_3 ||
                                HasDeviceExtension(device, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  const bool has_driver_props = core_version >= VK_API_VERSION_1_2 ||
                                HasDeviceExtension(device, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
  VkPhysicalDeviceMaintenance4Properties maintenance4{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
  // Compute units, where a vendor extension reports them (the decode kernels size their split-K by them).
  const bool has_sm_builtins = HasDeviceExtension(device, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  const bool has_amd_cores = HasDeviceExtension(device, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm_builtins{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD amd_cores{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  void** tail = &subgroup.pNext;
  if (has_size_control) { *tail = &size_control; tail = &size_control.pNext; }
  if (has_driver_props) { *tail = &driver; tail = &driver.pNext; }
  if (core_version >= VK_API_VERSION_1_3) { *tail = &maintenance4; tail = &maintenance4.pNext; }
  if (has_sm_builtins) { *tail = &sm_builtins; tail = &sm_builtins.pNext; }
  if (has_amd_cores) { *tail = &amd_cores; tail = &amd_cores.pNext; }
  vkGetPhysicalDeviceProperties2(device, &properties);
  const VkPhysicalDeviceLimits& limits = properties.properties.limits;

  info.name = properties.properties.deviceName;
  info.type = properties.properties.deviceType;
  info.vendor_id = properties.properties.vendorID;
  info.device_id = properties.properties.deviceID;
  info.api_version = properties.properties.apiVersion;
  info.driver_version = properties.properties.driverVersion;
  std::memcpy(info.pipeline_cache_uuid, properties.properties.pipelineCacheUUID, VK_UUID_SIZE);
  if (has_driver_props) info.driver = std::string(driver.driverName) + " " + driver.driverInfo;

  info.shared_memory_bytes = limits.maxComputeSharedMemorySize;
  info.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) info.max_workgroup_count[i] = limits.maxComputeWorkGroupCount[i];
  info.max_storage_buffer_range = limits.maxStorageBufferRange;
  info.max_buffer_size = core_version >= VK_API_VERSION_1_3 ? maintenance4.maxBufferSize : 0;
  info.min_storage_buffer_offset_alignment = limits.minStorageBufferOffsetAlignment;
  info.timestamp_period_ns = limits.timestampComputeAndGraphics ? limits.timestampPeriod : 0.0f;
  if (has_sm_builtins) info.compute_units = sm_builtins.shaderSMCount;
  if (has_amd_cores) {
    info.compute_units = amd_cores.shaderEngineCount * amd_cores.shaderArraysPerEngineCount *
                         amd_cores.computeUnitsPerShaderArray;
  }

  info.subgroup_size = subgroup.subgroupSize;
  info.min_subgroup_size = has_size_control ? size_control.minSubgroupSize : subgroup.subgroupSize;
  info.max_subgroup_size = has_size_control ? size_control.maxSubgroupSize : subgroup.subgroupSize;
  const bool compute_subgroups = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  info.subgroup_shuffle_in_compute = compute_subgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  info.subgroup_vote_in_compute = compute_subgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT);

  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features float16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &storage16;
  void** feature_tail = &storage16.pNext;
  if (core_version >= VK_API_VERSION_1_2 || HasDeviceExtension(device, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) {
    *feature_tail = &float16;
    feature_tail = &float16.pNext;
  }
  const bool has_atomic_float = HasDeviceExtension(device, VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
  if (has_atomic_float) *feature_tail = &atomic_float;
  vkGetPhysicalDeviceFeatures2(device, &features);
  info.storage_buffer_16bit = storage16.storageBuffer16BitAccess;
  info.shader_float16 = float16.shaderFloat16;
  info.buffer_float32_atomic_add = has_atomic_float && atomic_float.shaderBufferFloat32AtomicAdd;

  info.push_descriptor = HasDeviceExtension(device, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  ProbeCooperativeMatrix(instance, instance_api_version, device, &info);

  info.usable_shared_memory_bytes = info.shared_memory_bytes;
  info.use_subgroup_ops = info.subgroup_shuffle_in_compute;
  info.use_push_descriptors = info.push_descriptor;
  // Vulkan 1.2: shaderFloat16 is enabled through the core feature struct, without an extension.
  info.use_float16_arithmetic = info.shader_float16 && info.storage_buffer_16bit && core_version >= VK_API_VERSION_1_2;
  info.use_float32_atomic_add = info.buffer_float32_atomic_add;
  return info;
}

void ApplyLimits(const ContextOptions& options, DeviceInfo* info) {
  if (options.max_shared_bytes != 0 && options.max_shared_bytes < info->usable_shared_memory_bytes) {
    info->usable_shared_memory_bytes = options.max_shared_bytes;
  }
  if (options.disable_subgroup_ops) info->use_subgroup_ops = false;
  if (options.disable_push_descriptors) info->use_push_descriptors = false;
  if (options.disable_float16_arithmetic) info->use_float16_arithmetic = false;
}

}  // namespace vkflash::vk
