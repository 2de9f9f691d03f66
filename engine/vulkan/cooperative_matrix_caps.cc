#include "vulkan/cooperative_matrix_caps.h"

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

// Component types and scope share their values between the NV and KHR extensions.
constexpr uint32_t kFloat16 = 0, kFloat32 = 1, kScopeSubgroup = 3;

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

}  // namespace

void ProbeCooperativeMatrix(VkInstance instance, VkPhysicalDevice device, DeviceInfo* info) {
  info->nv_cooperative_matrix = HasDeviceExtension(device, kNvCooperativeMatrixExtension);
  info->khr_cooperative_matrix = HasDeviceExtension(device, kKhrCooperativeMatrixExtension);
  if (!info->nv_cooperative_matrix && !info->khr_cooperative_matrix) return;
  if (info->api_version < VK_API_VERSION_1_2 || instance == VK_NULL_HANDLE) return;  // memory model + float16: core 1.2

  VkPhysicalDeviceCooperativeMatrixFeaturesNV nv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  CooperativeMatrixFeaturesKhr khr{kCooperativeMatrixFeaturesKhrType};
  VkPhysicalDeviceVulkan12Features core12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &core12;
  void** tail = &core12.pNext;
  if (info->nv_cooperative_matrix) { *tail = &nv; tail = &nv.pNext; }
  if (info->khr_cooperative_matrix) { *tail = &khr; tail = &khr.pNext; }
  vkGetPhysicalDeviceFeatures2(device, &features);

  const bool common = core12.shaderFloat16 && core12.vulkanMemoryModel && info->storage_buffer_16bit &&
                      info->subgroup_shuffle_in_compute && info->min_subgroup_size == info->max_subgroup_size;
  if (!common) return;
  info->nv_cooperative_matrix_f16 = info->nv_cooperative_matrix && nv.cooperativeMatrix && NvHasShape(instance, device);
  info->khr_cooperative_matrix_f16 =
      info->khr_cooperative_matrix && khr.cooperativeMatrix && KhrHasShape(instance, device);
}

}  // namespace vkflash::vk
