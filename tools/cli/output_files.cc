#include "output_files.h"

#include <cstdio>
#include <unistd.h>

namespace vkflash::cli {

OutputFiles::~OutputFiles() {
  for (const Staged& s : staged_) std::remove(s.temporary.c_str());
}

Status OutputFiles::Stage(const std::string& path, const tools::NpyArray& array) {
  for (const Staged& s : staged_) {
    if (s.destination == path) {
      return Status::Error(ErrorCode::kInvalidArgument, "two outputs would be written to '" + path + "'");
    }
  }
  const std::string temporary = path + ".vkflash-" + std::to_string(getpid()) + ".tmp";
  Status written = tools::WriteNpy(temporary, array);
  if (!written.ok()) {
    return Status::Error(ErrorCode::kIo, "cannot write output '" + path + "' (" + written.message() + ")");
  }
  staged_.push_back({temporary, path});
  return Status::Ok();
}

Status OutputFiles::Commit() {
  for (size_t i = 0; i < staged_.size(); ++i) {
    if (std::rename(staged_[i].temporary.c_str(), staged_[i].destination.c_str()) != 0) {
      // Renames within one folder fail only in exotic cases; the files already moved stay.
      staged_.erase(staged_.begin(), staged_.begin() + std::ptrdiff_t(i));
      return Status::Error(ErrorCode::kIo, "cannot move output into place at '" + staged_.front().destination + "'");
    }
  }
  staged_.clear();
  return Status::Ok();
}

}  // namespace vkflash::cli
