// Checks of caller-provided BufferViews against what a kernel will read and write, so that a bad
// view is an error message rather than a device fault or a silent wrong answer.
#pragma once

#include <vkflash/device_info.hpp>

#include <initializer_list>
#include <vector>

namespace vkflash::attention {

struct NamedView {
  const char* name;  // "q", "lse", ... for messages
  BufferView view;
  uint64_t required_bytes;
  // A workspace is bound in parts, each its own descriptor range: the largest of them is what
  // must fit maxStorageBufferRange. 0: the view is bound whole.
  uint64_t largest_part_bytes = 0;
};

// Each view: non-null, at least `required_bytes`, every bound range within maxStorageBufferRange,
// offset aligned to minStorageBufferOffsetAlignment.
Status CheckViews(const DeviceInfo& device, const std::vector<NamedView>& views);

// Outputs must not overlap any input or each other: the kernels read inputs while other
// workgroups write outputs.
Status CheckNoOverlap(const std::vector<NamedView>& outputs, const std::vector<NamedView>& inputs);

// A slopes, sinks or mask view on a call without that variant (AttentionParams::alibi, sinks,
// mask) is an error, not silently ignored: a forgotten flag would otherwise compute plain
// attention. Checked by every call, even one with nothing to compute.
Status CheckNoStrayScoreModViews(const AttentionParams& params, const BufferView& alibi_slopes, const BufferView& sinks,
                                 const BufferView& mask);

// The score modifiers' views a call reads, checked as CheckViews does: float32 slopes, [Hq] or
// [B, Hq], sink logits, [Hq], and the mask (MaskBytes); and CheckNoStrayScoreModViews. Returns the
// views the call reads (none without variants).
Result<std::vector<NamedView>> CheckScoreModViews(const DeviceInfo& device, const AttentionParams& params,
                                                  const BufferView& alibi_slopes, const BufferView& sinks,
                                                  const BufferView& mask);

// The tensor-core kernels move 16-byte vectors, so every view they touch must start at a multiple
// of 16 bytes (minStorageBufferOffsetAlignment may allow less); otherwise the scalar kernels run.
bool VectorAligned(std::initializer_list<BufferView> views);

}  // namespace vkflash::attention
