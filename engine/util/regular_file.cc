#include "util/regular_file.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

namespace vkflash {
namespace fs = std::filesystem;

Result<RegularFile> RegularFile::Open(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error) return Status::Error(ErrorCode::kIo, "cannot open '" + path + "': " + error.message());
  if (!fs::is_regular_file(status)) {
    return Status::Error(ErrorCode::kInvalidArgument,
                         "'" + path + "' is " + (fs::is_directory(status) ? "a directory" : "not a regular file"));
  }
  const uintmax_t size = fs::file_size(path, error);
  if (error) return Status::Error(ErrorCode::kIo, "cannot read '" + path + "': " + error.message());
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return Status::Error(ErrorCode::kIo, "cannot open '" + path + "'");
  return RegularFile(file, uint64_t(size), path);
}

RegularFile::RegularFile(RegularFile&& other) noexcept { *this = std::move(other); }

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) std::fclose(file_);
    file_ = std::exchange(other.file_, nullptr);
    size_ = std::exchange(other.size_, 0);
    position_ = std::exchange(other.position_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (file_ != nullptr) std::fclose(file_);
}

Status RegularFile::ReadNext(void* destination, uint64_t bytes) {
  if (bytes > size_ - position_) {
    return Status::Error(ErrorCode::kIo, "'" + path_ + "' ends at byte " + std::to_string(size_) + ", before byte " +
                                             std::to_string(position_ + bytes));
  }
  auto* out = static_cast<unsigned char*>(destination);
  while (bytes > 0) {
    const size_t chunk = size_t(std::min<uint64_t>(bytes, uint64_t(1) << 30));
    const size_t got = std::fread(out, 1, chunk, file_);
    if (got == 0) return Status::Error(ErrorCode::kIo, "cannot read '" + path_ + "' (it may have shrunk)");
    out += got;
    position_ += got;
    bytes -= got;
  }
  return Status::Ok();
}

Result<std::vector<uint8_t>> RegularFile::ReadRest(uint64_t max_bytes) {
  const uint64_t rest = size_ - position_;
  if (rest > max_bytes) {
    return Status::Error(ErrorCode::kIo, "'" + path_ + "' holds " + std::to_string(size_) + " bytes, more than the " +
                                             std::to_string(max_bytes) + " expected");
  }
  std::vector<uint8_t> bytes(rest);
  if (Status read = ReadNext(bytes.data(), rest); !read.ok()) return read;
  return bytes;
}

PathKind KindOfPath(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) return PathKind::kMissing;
  if (error) return PathKind::kOther;  // e.g. a folder on the way that cannot be searched
  if (fs::is_regular_file(status)) return PathKind::kRegularFile;
  if (fs::is_directory(status)) return PathKind::kDirectory;
  return PathKind::kOther;
}

Status WriteFileAtomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  if (KindOfPath(path) == PathKind::kDirectory) {
    return Status::Error(ErrorCode::kInvalidArgument, "'" + path + "' is a directory");
  }
  // Writers of the same path each create their own temporary file, named by process and call; "x"
  // fails where the name exists (one left by a crashed process of the same id), and the next is tried.
  static std::atomic<uint64_t> counter{0};
  std::string temporary;
  std::FILE* file = nullptr;
  for (int attempt = 0; attempt < 16 && file == nullptr; ++attempt) {
    temporary = path + ".tmp" + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1));
    errno = 0;
    file = std::fopen(temporary.c_str(), "wbx");
    if (file == nullptr && errno != EEXIST) break;
  }
  if (file == nullptr) return Status::Error(ErrorCode::kIo, "cannot create '" + temporary + "'");
  const bool written = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  const bool closed = std::fclose(file) == 0;
  std::error_code error;
  if (!written || !closed) {
    fs::remove(temporary, error);
    return Status::Error(ErrorCode::kIo, "cannot write '" + temporary + "'");
  }
  fs::rename(temporary, path, error);  // replaces an existing file on every platform
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    return Status::Error(ErrorCode::kIo, "cannot move '" + path + "' into place: " + error.message());
  }
  return Status::Ok();
}

}  // namespace vkflash
