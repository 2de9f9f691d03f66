#include "validated_context.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <mutex>

namespace vkflash::testing {
namespace {

std::mutex g_mutex;
std::vector<std::string> g_messages;        // since the last RequireNoValidationMessages
std::vector<std::string> g_all_messages;    // since the start
std::map<Knobs, std::unique_ptr<Context>> g_contexts;

}  // namespace

const char* KnobsName(Knobs knobs) {
  switch (knobs) {
    case Knobs::kDevice: return "device limits";
    case Knobs::kMobile: return "16 KB shared, no subgroup ops";
    case Knobs::kNoPushDescriptors: return "no push descriptors";
    case Knobs::kSmallLoopBudget: return "a loop budget of 4000 iterations";
  }
  return "?";
}

ContextOptions ValidatedOptions() {
  ContextOptions options;
  options.enable_validation = true;
  options.message_callback = RecordValidationMessage;
  return options;
}

void RecordValidationMessage(MessageSeverity severity, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::string line = std::string(severity == MessageSeverity::kError ? "error: " : "warning: ") + message;
  g_messages.push_back(line);
  g_all_messages.push_back(line);
}

Context& SharedContext(Knobs knobs) {
  auto& slot = g_contexts[knobs];
  if (!slot) {
    ContextOptions options = ValidatedOptions();
    options.max_shared_bytes = knobs == Knobs::kMobile ? 16384 : 0;
    options.disable_subgroup_ops = knobs == Knobs::kMobile;
    options.disable_push_descriptors = knobs == Knobs::kNoPushDescriptors;
    options.max_loop_iterations = knobs == Knobs::kSmallLoopBudget ? 4000 : 0;
    auto context = Context::Create(options);
    INFO(context.status().ToString());
    REQUIRE(context.ok());
    slot = std::move(context).value();
  }
  return *slot;
}

void ReleaseSharedContexts() { g_contexts.clear(); }

const std::vector<std::string>& ValidationMessages() { return g_all_messages; }

void RequireNoValidationMessages() {
  std::vector<std::string> messages;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    messages.swap(g_messages);
  }
  for (const auto& m : messages) UNSCOPED_INFO(m);
  REQUIRE(messages.empty());
}

}  // namespace vkflash::testing
