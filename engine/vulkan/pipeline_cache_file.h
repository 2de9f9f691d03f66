// The on-disk pipeline cache: vkflash's own header (magic, the device identity, a checksum) in
// front of the driver's VkPipelineCache blob. A file from another device or driver, or one that
// is truncated or altered, is never handed to the driver.
#pragma once

#include <vkflash/device_info.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace vkflash::vk {

struct CacheFileRead {
  PipelineCacheState state = PipelineCacheState::kStartedEmpty;
  std::vector<uint8_t> driver_blob;  // non-empty only when state == kLoaded
};

// Reads `path`. A missing file is kStartedEmpty; a foreign, corrupt or unreadable file is reported
// in `state` (not as an error): the cache then starts empty. A path that names a directory or
// another non-file is an error (kInvalidArgument).
Result<CacheFileRead> ReadPipelineCacheFile(const std::string& path, const DeviceInfo& device);

// Writes header + `driver_blob` to `path` atomically (temporary file, then rename); a directory
// at `path` is refused.
Status WritePipelineCacheFile(const std::string& path, const DeviceInfo& device,
                              const std::vector<uint8_t>& driver_blob);

}  // namespace vkflash::vk
