// Checks of caller-provided BufferViews against what a kernel will read and write, so that a bad
// view is an error message rather than a device fault or a silent wrong answer.
#pragma once

#include <vkflash/vkflash.hpp>

#include <vector>

namespace vkflash::attention {

struct NamedView {
  const char* name;  // "q", "lse", ... for messages
  BufferView view;
  uint64_t required_bytes;
};

// Each view: non-null, at least `required_bytes`, within maxStorageBufferRange, offset aligned to
// minStorageBufferOffsetAlignment.
Status CheckViews(const DeviceInfo& device, const std::vector<NamedView>& views);

// Outputs must not overlap any input or each other: the kernels read inputs while other
// workgroups write outputs.
Status CheckNoOverlap(const std::vector<NamedView>& outputs, const std::vector<NamedView>& inputs);

}  // namespace vkflash::attention
