// Turning VkResults into Status (engine-internal).
#pragma once

#include <vkflash/result.hpp>

namespace vkflash {

const char* VkResultName(VkResult result);

// OK for VK_SUCCESS (and the other non-negative codes); otherwise an error saying what failed:
// "<what> failed: VK_ERROR_...". Out-of-memory results map to ErrorCode::kOutOfMemory.
Status VkCheck(VkResult result, const char* what);

}  // namespace vkflash

#define VKF_VK_RETURN_IF_ERROR(call, what) VKF_RETURN_IF_ERROR(::vkflash::VkCheck((call), (what)))
