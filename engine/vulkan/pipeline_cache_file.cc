#include "vulkan/pipeline_cache_file.h"

#include <cstring>

#include "util/hash.h"
#include "util/regular_file.h"

namespace vkflash::vk {
namespace {

constexpr char kMagic[8] = {'V', 'K', 'F', 'L', 'P', 'C', '0', '1'};
// No driver's cache of vkflash's few dozen pipelines comes near this: a larger file is not ours.
constexpr uint64_t kMaxCacheFileBytes = uint64_t(1) << 30;

struct FileHeader {
  char magic[8];
  uint32_t vendor_id;
  uint32_t device_id;
  uint32_t driver_version;
  uint8_t pipeline_cache_uuid[VK_UUID_SIZE];
  uint32_t reserved;
  uint64_t blob_bytes;
  uint64_t blob_fnv1a;
};
static_assert(sizeof(FileHeader) == 56, "the file header has no padding");

// The first bytes of every VkPipelineCache blob (VK_PIPELINE_CACHE_HEADER_VERSION_ONE).
struct DriverBlobHeader {
  uint32_t header_bytes;
  uint32_t header_version;
  uint32_t vendor_id;
  uint32_t device_id;
  uint8_t pipeline_cache_uuid[VK_UUID_SIZE];
};

bool SameDevice(uint32_t vendor, uint32_t device, const uint8_t* uuid, const DeviceInfo& info) {
  return vendor == info.vendor_id && device == info.device_id &&
         std::memcmp(uuid, info.pipeline_cache_uuid, VK_UUID_SIZE) == 0;
}

}  // namespace

Result<CacheFileRead> ReadPipelineCacheFile(const std::string& path, const DeviceInfo& device) {
  CacheFileRead read;
  if (KindOfPath(path) == PathKind::kMissing) return read;  // no cache yet
  auto file = RegularFile::Open(path);
  if (!file.ok() && file.status().code() == ErrorCode::kIo) {
    read.state = PipelineCacheState::kIgnoredUnreadable;  // a cache only saves time: go on without
    return read;
  }
  if (!file.ok()) {  // a directory or another non-file: the path is wrong
    return Status::Error(file.status().code(), "pipeline cache: " + file.status().message());
  }
  if (file->size() > kMaxCacheFileBytes) {
    read.state = PipelineCacheState::kIgnoredCorrupt;  // larger than any cache vkflash writes
    return read;
  }
  auto contents = file->ReadRest(kMaxCacheFileBytes);
  if (!contents.ok()) {
    read.state = PipelineCacheState::kIgnoredUnreadable;
    return read;
  }
  const std::vector<uint8_t>& bytes = *contents;

  FileHeader header;
  if (bytes.size() < sizeof(header)) {
    read.state = PipelineCacheState::kIgnoredCorrupt;
    return read;
  }
  std::memcpy(&header, bytes.data(), sizeof(header));
  const uint8_t* blob = bytes.data() + sizeof(header);
  const size_t blob_bytes = bytes.size() - sizeof(header);
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 || header.blob_bytes != blob_bytes ||
      header.blob_fnv1a != Fnv1a64(blob, blob_bytes) || blob_bytes < sizeof(DriverBlobHeader)) {
    read.state = PipelineCacheState::kIgnoredCorrupt;
    return read;
  }
  DriverBlobHeader driver_header;
  std::memcpy(&driver_header, blob, sizeof(driver_header));
  if (!SameDevice(header.vendor_id, header.device_id, header.pipeline_cache_uuid, device) ||
      header.driver_version != device.driver_version ||
      !SameDevice(driver_header.vendor_id, driver_header.device_id, driver_header.pipeline_cache_uuid, device)) {
    read.state = PipelineCacheState::kIgnoredForeign;
    return read;
  }
  read.state = PipelineCacheState::kLoaded;
  read.driver_blob.assign(blob, blob + blob_bytes);
  return read;
}

Status WritePipelineCacheFile(const std::string& path, const DeviceInfo& device,
                              const std::vector<uint8_t>& driver_blob) {
  FileHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.vendor_id = device.vendor_id;
  header.device_id = device.device_id;
  header.driver_version = device.driver_version;
  std::memcpy(header.pipeline_cache_uuid, device.pipeline_cache_uuid, VK_UUID_SIZE);
  header.blob_bytes = driver_blob.size();
  header.blob_fnv1a = Fnv1a64(driver_blob.data(), driver_blob.size());

  std::vector<uint8_t> bytes(sizeof(header) + driver_blob.size());
  std::memcpy(bytes.data(), &header, sizeof(header));
  if (!driver_blob.empty()) std::memcpy(bytes.data() + sizeof(header), driver_blob.data(), driver_blob.size());
  Status written = WriteFileAtomically(path, bytes);
  if (!written.ok()) return Status::Error(written.code(), "pipeline cache: " + written.message());
  return Status::Ok();
}

}  // namespace vkflash::vk
