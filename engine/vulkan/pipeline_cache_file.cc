#include "vulkan/pipeline_cache_file.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "util/hash.h"

namespace vkflash::vk {
namespace {

constexpr char kMagic[8] = {'V', 'K', 'F', 'L', 'P', 'C', '0', '1'};

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

CacheFileRead ReadPipelineCacheFile(const std::string& path, const DeviceInfo& device) {
  CacheFileRead read;
  std::ifstream file(path, std::ios::binary);
  if (!file) return read;  // no cache yet
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());

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

  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(&header), sizeof(header));
    file.write(reinterpret_cast<const char*>(driver_blob.data()), std::streamsize(driver_blob.size()));
    if (!file) {
      std::remove(temporary.c_str());
      return Status::Error(ErrorCode::kIo, "cannot write pipeline cache '" + temporary + "'");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return Status::Error(ErrorCode::kIo, "cannot move pipeline cache into place at '" + path + "'");
  }
  return Status::Ok();
}

}  // namespace vkflash::vk
