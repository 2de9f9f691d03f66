// The VKFLASH_* environment variables, read in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vkflash::env {

// Unset or empty: nullopt.
std::optional<std::string> Get(const char* name);
// "1", "true", "yes", "on" (any case) are true; unset, "0", "false", ... are false.
bool Flag(const char* name);
// A positive integer, or nullopt when unset; `error` gets a message when set but malformed.
std::optional<uint32_t> PositiveInteger(const char* name, std::string* error);

}  // namespace vkflash::env
