#include "cli_error.h"

#include <cstdio>

namespace vkflash::cli {

int ReportBadInput(const std::string& message) {
  std::fprintf(stderr, "vkflash: error: %s\n", message.c_str());
  return kExitBadInput;
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "vkflash: error: %s\n", status.message().c_str());
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported:
    case ErrorCode::kDeviceNotFound:
    case ErrorCode::kIo:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

}  // namespace vkflash::cli
