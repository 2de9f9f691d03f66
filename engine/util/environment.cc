#include "util/environment.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace vkflash::env {

std::optional<std::string> Get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool Flag(const char* name) {
  auto value = Get(name);
  if (!value) return false;
  std::string v = *value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

std::optional<uint32_t> PositiveInteger(const char* name, std::string* error) {
  auto value = Get(name);
  if (!value) return std::nullopt;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(value->c_str(), &end, 10);
  if (end == value->c_str() || *end != '\0' || parsed == 0 || parsed > 0xffffffffull ||
      !std::isdigit(static_cast<unsigned char>((*value)[0]))) {
    if (error) *error = std::string(name) + "='" + *value + "' is not a positive integer";
    return std::nullopt;
  }
  return static_cast<uint32_t>(parsed);
}

}  // namespace vkflash::env
