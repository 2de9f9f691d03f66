// Files vkflash is given by path (the pipeline cache, .npy tensors): only regular files are read
// (a directory, a FIFO or a device such as /dev/zero is refused), never more than the file holds,
// and nothing throws (libstdc++'s streams throw from a read that fails midway, e.g. on a folder).
#pragma once

#include <vkflash/result.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace vkflash {

// A regular file open for reading from its start.
class RegularFile {
 public:
  // kIo when `path` cannot be opened; kInvalidArgument when it is not a regular file.
  static Result<RegularFile> Open(const std::string& path);
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  // Its size when opened.
  uint64_t size() const { return size_; }
  // The next `bytes` bytes, or kIo when the file ends before them.
  Status ReadNext(void* destination, uint64_t bytes);
  // The rest of the file, or kIo when it holds more than `max_bytes`.
  Result<std::vector<uint8_t>> ReadRest(uint64_t max_bytes);

 private:
  RegularFile(std::FILE* file, uint64_t size, std::string path) : file_(file), size_(size), path_(std::move(path)) {}

  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
  std::string path_;
};

// What a path names, for checks before anything is written.
enum class PathKind { kMissing, kRegularFile, kDirectory, kOther };
PathKind KindOfPath(const std::string& path);

// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so that the
// destination holds either its old contents or all the new ones.
Status WriteFileAtomically(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace vkflash
