#include "vulkan/cooperative_matrix_caps.h"

#include <algorithm>
#include <vector>

#include "vulkan/device_caps.h"

namespace vkflash::vk {
namespace {

// VK_KHR_cooperative_matrix's properties (the struct and enum values of the Vulkan registry;
// declared by hand so that Debian bookworm's headers build it).
struct CooperativeMatrixPropertiesKhr {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize, NSize, KSize;
  uint32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  uint32_t scope;
};
constexpr VkStructureType kCooperativeMatrixPropertiesKhrType = VkStructureType(1000506001);

// VK_NV_cooperative_matrix2's flexible-dimension shapes.
struct FlexibleDimensionsPropertiesNv {
  VkStructureType sType;
  void* pNext;
  uint32_t MGranularity, NGranularity, KGranularity;
  uint32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  uint32_t scope;
  uint32_t workgroupInvocations;
};
constexpr VkStructureType kFlexibleDimensionsPropertiesNvType = VkStructureType(1000593001);
// VkPhysicalDeviceCooperativeMatrix2PropertiesNV.
struct CooperativeMatrix2PropertiesNv {
  VkStructureType sType;
  void* pNext;
  uint32_t workgroupScopeMaxWorkgroupSize;
  uint32_t flexibleDimensionsMaxDimension;
  uint32_t workgroupScopeReservedSharedMemory;
};
constexpr VkStructureType kCooperativeMatrix2PropertiesNvType = VkStructureType(1000593002);

// Component types and scope share their values between the NV and KHR extensions.
constexpr uint32_t kFloat16 = 0, kFloat32 = 1, kScopeWorkgroup = 2, kScopeSubgroup = 3;

bool IsOurShape(uint32_t m, uint32_t n, uint32_t k, uint32_t a, uint32_t b, uint32_t c, uint32_t result,
                uint32_t scope) {
  return m == 16 && n == 16 && k == 16 && a == kFloat16 && b == kFloat16 && c == kFloat32 && result == kFloat32 &&
         scope == kScopeSubgroup;
}

// The shapes the device lists through `function` (the NV or KHR query), each starting as `blank`.
template <typename Properties>
std::vector<Properties> ListShapes(VkInstance instance, VkPhysicalDevice device, const char* function,
                                   const Properties& blank) {
  using Get = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, Properties*);
  auto get = reinterpret_cast<Get>(vkGetInstanceProcAddr(instance, function));
  uint32_t count = 0;
  if (get == nullptr || get(device, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<Properties> shapes(count, blank);
  if (get(device, &count, shapes.data()) < 0) return {};
  shapes.resize(count);
  return shapes;
}

bool NvHasShape(VkInstance instance, VkPhysicalDevice device) {
  for (const auto& s : ListShapes(instance, device, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV",
                                  VkCooperativeMatrixPropertiesNV{VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV})) {
    if (IsOurShape(s.MSize, s.NSize, s.KSize, s.AType, s.BType, s.CType, s.DType, s.scope)) return true;
  }
  return false;
}

bool KhrHasShape(VkInstance instance, VkPhysicalDevice device) {
  CooperativeMatrixPropertiesKhr blank{};
  blank.sType = kCooperativeMatrixPropertiesKhrType;
  for (const auto& s : ListShapes(instance, device, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", blank)) {
    if (!s.saturatingAccumulation && IsOurShape(s.MSize, s.NSize, s.KSize, s.AType, s.BType, s.CType, s.ResultType, s.scope)) {
      return true;
    }
  }
  return false;
}

// The workgroup sizes at which the device lists float16 x float16 + float32 workgroup-scope
// matrices of flexible dimensions, with their granularities, and the coarsest granularity among
// them; and the coarsest granularity of such subgroup-scope matrices.
void ListCooperativeMatrix2Shapes(VkInstance instance, VkPhysicalDevice device, DeviceInfo* info) {
  FlexibleDimensionsPropertiesNv blank{};
  blank.sType = kFlexibleDimensionsPropertiesNvType;
  for (const auto& s :
       ListShapes(instance, device, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV", blank)) {
    if (s.AType != kFloat16 || s.BType != kFloat16 || s.CType != kFloat32 || s.ResultType != kFloat32 ||
        s.saturatingAccumulation) {
      continue;
    }
    const uint32_t granularity = std::max({s.MGranularity, s.NGranularity, s.KGranularity});
    if (s.scope == kScopeSubgroup) {
      info->cooperative_matrix2_subgroup_granularity =
          std::max(info->cooperative_matrix2_subgroup_granularity, granularity);
    } else if (s.scope == kScopeWorkgroup && s.workgroupInvocations != 0) {
      info->cooperative_matrix2_workgroups.push_back(
          {s.workgroupInvocations, s.MGranularity, s.NGranularity, s.KGranularity});
      info->cooperative_matrix2_granularity = std::max(info->cooperative_matrix2_granularity, granularity);
    }
  }
}

}  // namespace

void ProbeCooperativeMatrix(VkInstance instance, uint32_t instance_api_version, VkPhysicalDevice device,
                            DeviceInfo* info) {
  info->nv_cooperative_matrix = HasDeviceExtension(device, kNvCooperativeMatrixExtension);
  info->khr_cooperative_matrix = HasDeviceExtension(device, kKhrCooperativeMatrixExtension);
  if (!info->nv_cooperative_matrix && !info->khr_cooperative_matrix) return;
  // Memory model and float16 are core 1.2 features, queried through VkPhysicalDeviceVulkan12Features:
  // the instance must be 1.2 too (one made for an older loader cannot use them).
  if (instance == VK_NULL_HANDLE || std::min(instance_api_version, info->api_version) < VK_API_VERSION_1_2) return;

  VkPhysicalDeviceCooperativeMatrixFeaturesNV nv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  CooperativeMatrixFeaturesKhr khr{kCooperativeMatrixFeaturesKhrType};
  VkPhysicalDeviceVulkan12Features core12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  CooperativeMatrix2FeaturesNv nv2{kCooperativeMatrix2FeaturesNvType};
  VkPhysicalDeviceVulkan13Features core13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  info->nv_cooperative_matrix2 = HasDeviceExtension(device, kNvCooperativeMatrix2Extension);
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &core12;
  void** tail = &core12.pNext;
  if (info->nv_cooperative_matrix) { *tail = &nv; tail = &nv.pNext; }
  if (info->khr_cooperative_matrix) { *tail = &khr; tail = &khr.pNext; }
  // The workgroup-scope kernels are SPIR-V 1.6 (Vulkan 1.3, for the instance too), whose
  // LocalSizeId needs maintenance4.
  if (info->nv_cooperative_matrix2 && std::min(instance_api_version, info->api_version) >= VK_API_VERSION_1_3) {
    *tail = &nv2;
    nv2.pNext = &core13;
    tail = &core13.pNext;
  }
  vkGetPhysicalDeviceFeatures2(device, &features);

  const bool float16_and_memory_model = core12.shaderFloat16 && core12.vulkanMemoryModel && info->storage_buffer_16bit;
  if (!float16_and_memory_model) return;
  // Workgroup-scope matrices build on VK_KHR_cooperative_matrix; they need no subgroup operations.
  if (info->nv_cooperative_matrix2 && core13.maintenance4 && info->khr_cooperative_matrix && khr.cooperativeMatrix &&
      nv2.cooperativeMatrixWorkgroupScope && nv2.cooperativeMatrixFlexibleDimensions &&
      nv2.cooperativeMatrixReductions && nv2.cooperativeMatrixConversions &&
      nv2.cooperativeMatrixPerElementOperations && nv2.cooperativeMatrixTensorAddressing) {
    ListCooperativeMatrix2Shapes(instance, device, info);
    info->nv_cooperative_matrix2_f16 = !info->cooperative_matrix2_workgroups.empty();
    // Shared memory the driver keeps for workgroup-scope matrices: a kernel's own may use the rest.
    CooperativeMatrix2PropertiesNv nv2_properties{kCooperativeMatrix2PropertiesNvType};
    VkPhysicalDeviceProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    properties.pNext = &nv2_properties;
    vkGetPhysicalDeviceProperties2(device, &properties);
    info->cooperative_matrix2_reserved_shared_memory = nv2_properties.workgroupScopeReservedSharedMemory;
  }
  // The subgroup-scope kernels reduce rows with shuffles and are built for one subgroup size.
  if (!info->subgroup_shuffle_in_compute || info->min_subgroup_size != info->max_subgroup_size) return;
  info->nv_cooperative_matrix_f16 = info->nv_cooperative_matrix && nv.cooperativeMatrix && NvHasShape(instance, device);
  info->khr_cooperative_matrix_f16 =
      info->khr_cooperative_matrix && khr.cooperativeMatrix && KhrHasShape(instance, device);
}

}  // namespace vkflash::vk
