// How the CLI fails: one line on stderr and an exit code the caller can script on.
#pragma once

#include <vkflash/device_info.hpp>

#include <string>

namespace vkflash::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the device or driver failed, or a result was wrong
inline constexpr int kExitBadInput = 2;  // the user's input or options are not acceptable

// Prints "vkflash: error: <message>" and returns the exit code for `status`: kExitBadInput for
// invalid arguments, unsupported inputs, unreadable files, unknown devices and inputs too large
// for the device's memory; else kExitFailure.
int ReportError(const Status& status);
int ReportBadInput(const std::string& message);

}  // namespace vkflash::cli
