#include "cli_error.h"

#include <cstdio>

namespace vkflash::cli {

namespace {

// One line of printable text whatever the message quotes (a file's header, say).
void PrintErrorLine(const std::string& message) {
  std::string line;
  for (char c : message) {
    const auto u = static_cast<unsigned char>(c);
    line += (u < 0x20 || u == 0x7f) ? ' ' : c;
  }
  std::fprintf(stderr, "vkflash: error: %s\n", line.c_str());
}

}  // namespace

int ReportBadInput(const std::string& message) {
  PrintErrorLine(message);
  return kExitBadInput;
}

int ReportError(const Status& status) {
  PrintErrorLine(status.message());
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported:
    case ErrorCode::kDeviceNotFound:
    case ErrorCode::kIo:
    case ErrorCode::kOutOfMemory:  // the input is too large for this device
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

}  // namespace vkflash::cli
