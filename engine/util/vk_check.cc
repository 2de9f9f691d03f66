#include "util/vk_check.h"

#include <string>

namespace vkflash {

const char* VkResultName(VkResult result) {
  switch (result) {
#define VKF_CASE(name) \
  case name:           \
    return #name;
    VKF_CASE(VK_SUCCESS)
    VKF_CASE(VK_NOT_READY)
    VKF_CASE(VK_TIMEOUT)
    VKF_CASE(VK_EVENT_SET)
    VKF_CASE(VK_EVENT_RESET)
    VKF_CASE(VK_INCOMPLETE)
    VKF_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    VKF_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VKF_CASE(VK_ERROR_INITIALIZATION_FAILED)
    VKF_CASE(VK_ERROR_DEVICE_LOST)
    VKF_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    VKF_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    VKF_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    VKF_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    VKF_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    VKF_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    VKF_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    VKF_CASE(VK_ERROR_FRAGMENTED_POOL)
    VKF_CASE(VK_ERROR_UNKNOWN)
    VKF_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    VKF_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    VKF_CASE(VK_ERROR_FRAGMENTATION)
    VKF_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    VKF_CASE(VK_PIPELINE_COMPILE_REQUIRED)
    VKF_CASE(VK_ERROR_SURFACE_LOST_KHR)
    VKF_CASE(VK_ERROR_NATIVE_WINDOW_IN_USE_KHR)
    VKF_CASE(VK_SUBOPTIMAL_KHR)
    VKF_CASE(VK_ERROR_OUT_OF_DATE_KHR)
    VKF_CASE(VK_ERROR_VALIDATION_FAILED_EXT)
#undef VKF_CASE
    default:
      return "VK_RESULT_UNKNOWN";
  }
}

Status VkCheck(VkResult result, const char* what) {
  if (result >= 0) return Status::Ok();
  const ErrorCode code = (result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY)
                             ? ErrorCode::kOutOfMemory
                             : ErrorCode::kVulkan;
  return Status::Error(code, std::string(what) + " failed: " + VkResultName(result) + " (" +
                                 std::to_string(int(result)) + ")",
                       result);
}

}  // namespace vkflash
