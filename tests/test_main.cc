// Catch2 entry point: after the tests, shared contexts are destroyed and the run fails if the
// validation layer reported anything at any point, even outside a test's own checks.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "support/validated_context.h"

int main(int argc, char* argv[]) {
  int result = Catch::Session().run(argc, argv);
  vkflash::testing::ReleaseSharedContexts();
  const auto& messages = vkflash::testing::ValidationMessages();
  if (!messages.empty()) {
    std::fprintf(stderr, "FAILED: the validation layer reported %zu message(s):\n", messages.size());
    for (const auto& m : messages) std::fprintf(stderr, "  %s\n", m.c_str());
    if (result == 0) result = 1;
  }
  return result;
}
