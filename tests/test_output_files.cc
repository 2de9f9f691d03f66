// OutputFiles (tools/cli/output_files.h) directly: all outputs or none, also when a move into
// place fails half-way.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "output_files.h"

using namespace vkflash;
namespace fs = std::filesystem;

namespace {

std::string Contents(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

void Write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A fresh, empty folder under the system's temporary folder, removed on scope exit.
struct TemporaryFolder {
  fs::path path = fs::temp_directory_path() / ("vkflash-output-files-" + std::to_string(getpid()));
  TemporaryFolder() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TemporaryFolder() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// Plans `first` as --a and `second` as --b, and stages "new first" and "new second" in them.
void PlanAndStage(cli::OutputFiles& files, const fs::path& first, const fs::path& second) {
  REQUIRE(files.Plan("--a", first.string()).ok());
  REQUIRE(files.Plan("--b", second.string()).ok());
  REQUIRE(files.StageText(first.string(), "new first").ok());
  REQUIRE(files.StageText(second.string(), "new second").ok());
}

}  // namespace

TEST_CASE("OutputFiles puts every output in place, or restores what was there", "[cli][output_files]") {
  TemporaryFolder folder;
  const fs::path first = folder.path / "first.json", second = folder.path / "second.json";

  SECTION("all staged: both written, no temporary file left") {
    Write(first, "old first");
    {
      cli::OutputFiles files;
      PlanAndStage(files, first, second);
      REQUIRE(files.Commit().ok());
    }
    CHECK(Contents(first) == "new first");
    CHECK(Contents(second) == "new second");
    CHECK(std::distance(fs::directory_iterator(folder.path), fs::directory_iterator()) == 2);
  }

  SECTION("the second move fails: the first destination gets its old contents back") {
    Write(first, "old first");
    {
      cli::OutputFiles files;
      PlanAndStage(files, first, second);
      // After planning, the second destination becomes a folder that is not empty: no file can
      // be renamed over it.
      fs::create_directories(second / "keep");
      const Status committed = files.Commit();
      REQUIRE_FALSE(committed.ok());
      CHECK(committed.code() == ErrorCode::kIo);
      CHECK(committed.message().find("--b") != std::string::npos);
      CHECK(Contents(first) == "old first");
      CHECK(fs::is_directory(second / "keep"));
    }
    // The destructor removed the temporary files; no backup is left either.
    CHECK(std::distance(fs::directory_iterator(folder.path), fs::directory_iterator()) == 2);
  }

  SECTION("the second move fails: a first destination that did not exist is removed again") {
    {
      cli::OutputFiles files;
      PlanAndStage(files, first, second);
      fs::create_directories(second / "keep");
      REQUIRE_FALSE(files.Commit().ok());
      CHECK_FALSE(fs::exists(first));
    }
    CHECK(std::distance(fs::directory_iterator(folder.path), fs::directory_iterator()) == 1);
  }

  SECTION("an output never staged: Commit refuses and nothing moves") {
    Write(first, "old first");
    {
      cli::OutputFiles files;
      REQUIRE(files.Plan("--a", first.string()).ok());
      REQUIRE(files.Plan("--b", second.string()).ok());
      REQUIRE(files.StageText(first.string(), "new first").ok());
      CHECK(files.Commit().code() == ErrorCode::kInvalidArgument);
    }
    CHECK(Contents(first) == "old first");
    CHECK_FALSE(fs::exists(second));
  }
}
