// Test contexts run with VK_LAYER_KHRONOS_validation and synchronization validation on. Every
// warning or error the layer reports is recorded; tests check the record, and the test binary
// fails at exit if anything was ever recorded (tests/test_main.cc).
#pragma once

#include <vkflash/device_info.hpp>

#include <memory>
#include <string>
#include <vector>

namespace vkflash::testing {

// Named configurations of the portability knobs.
enum class Knobs {
  kDevice,            // what the device offers
  kMobile,            // 16 KB shared memory, no subgroup operations (shared-memory reductions)
  kNoPushDescriptors, // descriptor sets from pools
  kSmallLoopBudget,   // as a driver that ends shader loops after 4000 iterations: long loops in chunks
};
const char* KnobsName(Knobs knobs);

// A context for `knobs`, created once per test process and reused (creation with validation is
// slow). REQUIREs that creation succeeded.
Context& SharedContext(Knobs knobs);
// Destroys the shared contexts (before the process exits, while the loader is still there).
void ReleaseSharedContexts();

// Options with validation on and messages going to the record.
ContextOptions ValidatedOptions();

// The kernels and tiles a context picks for `params`: "forward, dK/dV, dQ", each as
// "kernel QxK/T (W)": query rows x key rows per tile (for dK/dV the queries are the streamed side),
// invocations per row, invocations per workgroup.
std::string KernelsDescription(Context& context, const AttentionParams& params);

// A validated context with the device's own loop budget (none, or lavapipe's) that runs the scalar
// kernels and tiles `chunked` picks for `params`: what a chunked call is compared with bit for
// bit, in one pass or in fewer, longer chunks. `chunked` differs from the device's context only in
// its small loop budget (Knobs::kSmallLoopBudget); without the overrides a device without a budget
// picks larger tiles, whose sums round differently. REQUIREs scalar kernels, and that both
// contexts then choose the same kernels (not every choice can be forced).
std::unique_ptr<Context> SameTilesContext(Context& chunked, const AttentionParams& params);

// Adds a message to the record (for test code that makes its own Vulkan instance).
void RecordValidationMessage(MessageSeverity severity, const std::string& message);

// Every validation message so far, as "severity: text".
const std::vector<std::string>& ValidationMessages();
// Fails the current test if the layer reported anything since the last call, and clears the record.
void RequireNoValidationMessages();

}  // namespace vkflash::testing
