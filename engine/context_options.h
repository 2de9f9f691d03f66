// The VKFLASH_* environment variables, read once: Create() and Adopt() turn the caller's
// ContextOptions into resolved ones (what a field leaves unset, the environment fills in), and
// everything below the Context reads those. Nothing else in the engine reads the environment.
#pragma once

#include <vkflash/device_info.hpp>

namespace vkflash {

// The options with the environment applied: an empty device_selector or kernels, a zero
// max_shared_bytes or max_loop_iterations, a false flag, an empty tile override take the
// variable's value (kernels: "auto" when that is unset too). kInvalidArgument for a malformed
// number.
Result<ContextOptions> ResolveContextOptions(const ContextOptions& options);

// `requested`, or VKFLASH_DEVICE where it is empty (SelectDeviceIndex()).
std::string ResolveDeviceSelector(const std::string& requested);

}  // namespace vkflash
