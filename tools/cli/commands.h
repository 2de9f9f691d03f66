// The subcommands of `vkflash`. Each Add*Command registers its options on `parent` and returns
// the function that runs it once parsing is done.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace vkflash::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;  // returns the process exit code
};

Command AddInfoCommand(CLI::App& parent);
Command AddForwardCommand(CLI::App& parent);
Command AddBackwardCommand(CLI::App& parent);
Command AddCheckCommand(CLI::App& parent);
Command AddBenchCommand(CLI::App& parent);

}  // namespace vkflash::cli
