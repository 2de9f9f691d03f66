// Output files appear all together or not at all. Every destination is checked before anything is
// computed (its folder exists, it is not a directory, not one of the inputs, not another output)
// by creating its temporary file beside it; results are written to those temporary files and
// moved into place only when all are written. If a move fails, the files already moved are put
// back: a destination that existed gets its old contents again.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "npy.h"

namespace vkflash::cli {

class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();  // removes whatever was planned and not committed

  // A file the command reads: no output may replace it.
  void AddInput(const std::string& path);
  // Checks `path` as the destination of `option` (e.g. "--out", for messages) and creates its
  // temporary file. Call for every output before computing.
  Status Plan(const std::string& option, const std::string& path);
  // Writes `array` to the temporary file of the planned `path`.
  Status Stage(const std::string& path, const tools::NpyArray& array);
  // Writes `text` as it is to the temporary file of the planned `path`.
  Status StageText(const std::string& path, const std::string& text);
  // Moves every planned file into place, or none (see above). Every planned file must be staged.
  Status Commit();

 private:
  struct Planned {
    std::string option, destination, temporary;
    bool staged = false;
  };
  Status StageWith(const std::string& path, const std::function<Status(const std::string& temporary)>& write);

  std::vector<std::string> inputs_;
  std::vector<Planned> planned_;
};

}  // namespace vkflash::cli
