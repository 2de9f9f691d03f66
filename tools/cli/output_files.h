// Output files appear whole or not at all: each is written to a temporary name beside its
// destination, and renamed into place only when every output of the command succeeded.
#pragma once

#include <string>
#include <vector>

#include "npy.h"

namespace vkflash::cli {

class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();  // removes whatever was staged and not committed

  // Writes `array` to a temporary file for `path`.
  Status Stage(const std::string& path, const tools::NpyArray& array);
  // Renames every staged file into place.
  Status Commit();

 private:
  struct Staged {
    std::string temporary, destination;
  };
  std::vector<Staged> staged_;
};

}  // namespace vkflash::cli
