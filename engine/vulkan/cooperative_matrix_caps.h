// Does a device run vkflash's tensor-core kernels? They need 16x16x16 float16 x float16 +
// float32 cooperative matrices with subgroup scope (VK_NV_cooperative_matrix and/or
// VK_KHR_cooperative_matrix), plus shaderFloat16, vulkanMemoryModel and 16-bit storage.
#pragma once

#include <vkflash/device_info.hpp>

namespace vkflash::vk {

// Fills DeviceInfo::{nv,khr}_cooperative_matrix_f16 and the VK_NV_cooperative_matrix2 fields (the
// extension functions come from `instance`, created for `instance_api_version`).
void ProbeCooperativeMatrix(VkInstance instance, uint32_t instance_api_version, VkPhysicalDevice device,
                            DeviceInfo* info);

// Extension names for vkCreateDevice.
inline constexpr const char* kNvCooperativeMatrixExtension = "VK_NV_cooperative_matrix";
inline constexpr const char* kKhrCooperativeMatrixExtension = "VK_KHR_cooperative_matrix";

// VK_KHR_cooperative_matrix's feature struct, declared here when the Vulkan headers predate it
// (Debian bookworm's 1.3.239 does).
#ifdef VK_KHR_cooperative_matrix
using CooperativeMatrixFeaturesKhr = VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
#else
struct CooperativeMatrixFeaturesKhr {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
};
#endif
inline constexpr VkStructureType kCooperativeMatrixFeaturesKhrType = VkStructureType(1000506000);

// VK_NV_cooperative_matrix2 (workgroup-scope matrices, tensor addressing): its feature struct, by
// hand for the same reason. ProbeCooperativeMatrix also fills the DeviceInfo fields of it.
inline constexpr const char* kNvCooperativeMatrix2Extension = "VK_NV_cooperative_matrix2";
struct CooperativeMatrix2FeaturesNv {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrixWorkgroupScope;
  VkBool32 cooperativeMatrixFlexibleDimensions;
  VkBool32 cooperativeMatrixReductions;
  VkBool32 cooperativeMatrixConversions;
  VkBool32 cooperativeMatrixPerElementOperations;
  VkBool32 cooperativeMatrixTensorAddressing;
  VkBool32 cooperativeMatrixBlockLoads;
};
inline constexpr VkStructureType kCooperativeMatrix2FeaturesNvType = VkStructureType(1000593000);

// Sets the features the kernels of shaders/coopmat2/ use.
inline void RequestCooperativeMatrix2Features(CooperativeMatrix2FeaturesNv* features) {
  features->cooperativeMatrixWorkgroupScope = VK_TRUE;
  features->cooperativeMatrixFlexibleDimensions = VK_TRUE;
  features->cooperativeMatrixReductions = VK_TRUE;
  features->cooperativeMatrixConversions = VK_TRUE;
  features->cooperativeMatrixPerElementOperations = VK_TRUE;
  features->cooperativeMatrixTensorAddressing = VK_TRUE;
}

}  // namespace vkflash::vk
