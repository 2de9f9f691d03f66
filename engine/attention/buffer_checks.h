// Checks of caller-provided BufferViews against what a kernel will read and write, so that a bad
// view is an error message rather than a device fault or a silent wrong answer.
#pragma once

#include <vkflash/vkflash.hpp>

#include <initializer_list>

namespace vkflash::attention {

struct NamedView {
  const char* name;  // "q", "lse", ... for messages
  BufferView view;
  uint64_t required_bytes;
};

// Each view: non-null, at least `required_bytes`, within maxStorageBufferRange, offset aligned to
// minStorageBufferOffsetAlignment.
Status CheckViews(const DeviceInfo& device, std::initializer_list<NamedView> views);

// Outputs must not overlap any input or each other: the kernels read inputs while other
// workgroups write outputs.
Status CheckNoOverlap(std::initializer_list<NamedView> outputs, std::initializer_list<NamedView> inputs);

}  // namespace vkflash::attention
