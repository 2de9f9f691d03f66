// vkflash: exact FlashAttention on any Vulkan device, from the command line.
// See README.md and docs/design.md's CLI contract; exit codes are in cli_error.h.
#include <algorithm>
#include <exception>
#include <new>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_error.h"
#include "commands.h"

int main(int argc, char** argv) {
  using namespace vkflash::cli;
  CLI::App app{"vkflash: exact FlashAttention forward and backward on any Vulkan device"};
  app.set_version_flag("--version", std::string("vkflash ") + VKFLASH_VERSION);
  app.require_subcommand(1);
  const std::vector<Command> commands = {AddInfoCommand(app), AddForwardCommand(app), AddBackwardCommand(app),
                                         AddCheckCommand(app), AddBenchCommand(app)};
  // CLI11 would only say "A subcommand is required" for a mistyped command: name it instead.
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](const Command& c) { return c.app->get_name() == argv[1]; })) {
    return ReportBadInput(std::string("unknown command '") + argv[1] + "' (commands: info, forward, backward, check, bench)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return ReportBadInput(e.what());
  }
  // The library never throws; the host side (file contents, std::vector) can run out of memory.
  try {
    for (const Command& command : commands) {
      if (command.app->parsed()) return command.run();
    }
  } catch (const std::bad_alloc&) {
    return ReportBadInput("out of host memory (the input is too large for this machine)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkflash: error: %s\n", e.what());
    return kExitFailure;
  }
  return ReportBadInput("no command given (info, forward, backward, check, bench)");
}
