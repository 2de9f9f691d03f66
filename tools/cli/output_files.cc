#include "output_files.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace vkflash::cli {
namespace fs = std::filesystem;
namespace {

Status Bad(const std::string& message) { return Status::Error(ErrorCode::kInvalidArgument, message); }

// The folder a file path lies in ("." for a bare name).
fs::path FolderOf(const std::string& path) {
  const fs::path folder = fs::path(path).parent_path();
  return folder.empty() ? fs::path(".") : folder;
}

// One spelling per destination, so that "a/o.npy" and "a//./o.npy" are seen to be the same.
std::string Canonical(const std::string& path) {
  std::error_code error;
  const fs::path canonical = fs::weakly_canonical(path, error);
  return error ? path : canonical.string();
}

}  // namespace

OutputFiles::~OutputFiles() {
  std::error_code ignored;
  for (const Planned& p : planned_) fs::remove(p.temporary, ignored);
}

void OutputFiles::AddInput(const std::string& path) { inputs_.push_back(path); }

Status OutputFiles::Plan(const std::string& option, const std::string& path) {
  const std::string named = option + " '" + path + "'";
  if (path.empty()) return Bad(option + " needs a file name");
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (fs::is_directory(status)) return Bad(named + " is a directory, not a file name");
  if (fs::exists(status) && !fs::is_regular_file(status)) return Bad(named + " is not a regular file");
  const fs::path folder = FolderOf(path);
  if (!fs::is_directory(folder, error)) return Bad(named + ": the folder '" + folder.string() + "' does not exist");
  for (const std::string& input : inputs_) {
    if (fs::exists(status) && fs::equivalent(path, input, error)) {
      return Bad(named + " is also an input: it would be overwritten");
    }
  }
  const std::string canonical = Canonical(path);
  for (const Planned& p : planned_) {
    if (Canonical(p.destination) == canonical) return Bad(p.option + " and " + named + " name the same file");
  }
  // Creating the temporary file now shows that the folder takes new files.
  const std::string temporary =
      (folder / ("." + fs::path(path).filename().string() + ".vkflash-" + std::to_string(getpid()) + ".tmp")).string();
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) return Status::Error(ErrorCode::kIo, named + ": cannot create files in '" + folder.string() + "'");
  std::fclose(file);
  planned_.push_back({option, path, temporary});
  return Status::Ok();
}

Status OutputFiles::Stage(const std::string& path, const tools::NpyArray& array) {
  return StageWith(path, [&](const std::string& temporary) { return tools::WriteNpy(temporary, array); });
}

Status OutputFiles::StageText(const std::string& path, const std::string& text) {
  return StageWith(path, [&](const std::string& temporary) {
    std::FILE* file = std::fopen(temporary.c_str(), "wb");
    if (file == nullptr) return Status::Error(ErrorCode::kIo, "cannot create '" + temporary + "'");
    bool ok = text.empty() || std::fwrite(text.data(), 1, text.size(), file) == text.size();
    ok = std::fclose(file) == 0 && ok;
    return ok ? Status::Ok() : Status::Error(ErrorCode::kIo, "cannot write '" + temporary + "'");
  });
}

Status OutputFiles::StageWith(const std::string& path,
                              const std::function<Status(const std::string& temporary)>& write) {
  for (Planned& p : planned_) {
    if (p.destination != path) continue;
    Status written = write(p.temporary);
    if (!written.ok()) {
      return Status::Error(ErrorCode::kIo, "cannot write " + p.option + " '" + path + "' (" + written.message() + ")");
    }
    p.staged = true;
    return Status::Ok();
  }
  return Status::Error(ErrorCode::kInvalidArgument, "output '" + path + "' was not planned");
}

Status OutputFiles::Commit() {
  for (const Planned& p : planned_) {
    if (!p.staged) return Status::Error(ErrorCode::kInvalidArgument, p.option + " was never written");
  }
  // Destinations that exist are kept as backups until every move has succeeded.
  std::vector<std::string> backups(planned_.size());
  size_t moved = 0;
  std::error_code error;
  for (; moved < planned_.size(); ++moved) {
    const Planned& p = planned_[moved];
    if (fs::exists(p.destination, error)) {
      backups[moved] = p.temporary + ".previous";
      fs::create_hard_link(p.destination, backups[moved], error);
      if (error) {  // a filesystem without hard links: copy instead
        error.clear();
        fs::copy_file(p.destination, backups[moved], fs::copy_options::overwrite_existing, error);
      }
      if (error) break;
    }
    fs::rename(p.temporary, p.destination, error);
    if (error) break;
  }
  if (moved < planned_.size()) {
    const std::string failed = planned_[moved].option + " '" + planned_[moved].destination + "': " + error.message();
    std::error_code ignored;
    for (size_t i = 0; i < moved; ++i) {  // put back what was there before
      if (!backups[i].empty()) {
        fs::rename(backups[i], planned_[i].destination, ignored);
      } else {
        fs::remove(planned_[i].destination, ignored);
      }
    }
    for (const std::string& backup : backups) {
      if (!backup.empty()) fs::remove(backup, ignored);
    }
    return Status::Error(ErrorCode::kIo, "cannot move output into place, no output written: " + failed);
  }
  std::error_code ignored;
  for (const std::string& backup : backups) {
    if (!backup.empty()) fs::remove(backup, ignored);
  }
  planned_.clear();
  return Status::Ok();
}

}  // namespace vkflash::cli
