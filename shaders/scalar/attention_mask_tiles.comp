// The mask's block summary (common/shader_interface.h, VKF_MASK_TILE_*): one bit per block of 16
// rows x 16 keys of each mask head, 1 where the mask leaves some pair of the block open (an element
// other than -inf, or a true). The attention kernels read it to skip tiles the mask closes (the
// mask_closes_* functions in common/score_mod.glsl), as FlexAttention's block mask and llama.cpp's
// mask pre-pass do. One workgroup writes one uint: 16 rows x 32 blocks of keys, each invocation
// four columns of keys (coalesced reads), OR-ed into the word in shared memory. Dispatch: (uints
// per block row, block rows, mask heads from pc.head0), before the kernels that read it.
//
// Each invocation reads ROWS_IN_FLIGHT rows of all its columns at once and stops at the first
// batch after which every column has an open element: a closed block must be read whole, and one
// load after the other that took 16 memory latencies per column (docs/tuning-log.md).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_memory_scope_semantics : require  // a workgroup-scope shared-memory atomic
#extension GL_EXT_control_flow_attributes : require
#include "common/shader_interface.h"

layout(local_size_x = VKF_MASK_TILES_WORKGROUP_SIZE) in;
layout(push_constant) uniform PushBlock { MaskTilesPush pc; };

#define VKF_MASK_ELEMENTS_BINDING VKF_MASK_TILES_BINDING_MASK
#include "common/mask_elements.glsl"

layout(std430, set = 0, binding = VKF_MASK_TILES_BINDING_SUMMARY) writeonly buffer summary_block { uint summary[]; };

const uint KEYS_PER_WORD = 32u * VKF_MASK_TILE_KEYS;
const uint KEY_COLUMNS = KEYS_PER_WORD / VKF_MASK_TILES_WORKGROUP_SIZE;  // per invocation
const uint ROWS_IN_FLIGHT = 4;  // the open bias of the benchmarks stops after the first batch

shared uint open_blocks;

void main() {
  const uint word = gl_WorkGroupID.x, row_block = gl_WorkGroupID.y, mask_head = pc.head0 + gl_WorkGroupID.z;
  const uint lane = gl_LocalInvocationIndex;
  if (lane == 0) open_blocks = 0;
  barrier();

  const uint head_base = mask_head * pc.rows * pc.keys;
  const uint row0 = row_block * VKF_MASK_TILE_ROWS, row_end = min(pc.rows, row0 + VKF_MASK_TILE_ROWS);
  // Column c's key is first_key + c * VKF_MASK_TILES_WORKGROUP_SIZE (coalesced across the workgroup).
  const uint first_key = word * KEYS_PER_WORD + lane;
  bool open[KEY_COLUMNS];  // some element of the column's rows so far is open (past the keys: true)
  [[unroll]] for (uint c = 0; c < KEY_COLUMNS; ++c) open[c] = first_key + c * VKF_MASK_TILES_WORKGROUP_SIZE >= pc.keys;
  for (uint batch_row = row0; batch_row < row_end; batch_row += ROWS_IN_FLIGHT) {
    // Every load of the batch first (clamped into the mask: a row or key read twice changes no OR).
    float value[KEY_COLUMNS][ROWS_IN_FLIGHT];
    [[unroll]] for (uint c = 0; c < KEY_COLUMNS; ++c) {
      const uint key = min(first_key + c * VKF_MASK_TILES_WORKGROUP_SIZE, pc.keys - 1);
      [[unroll]] for (uint r = 0; r < ROWS_IN_FLIGHT; ++r) {
        value[c][r] = mask_value(head_base + min(batch_row + r, row_end - 1) * pc.keys + key);
      }
    }
    bool all_open = true;
    [[unroll]] for (uint c = 0; c < KEY_COLUMNS; ++c) {
      [[unroll]] for (uint r = 0; r < ROWS_IN_FLIGHT; ++r) open[c] = open[c] || value[c][r] != NEG_INF;
      all_open = all_open && open[c];
    }
    if (all_open) break;
  }
  uint bits = 0;
  [[unroll]] for (uint c = 0; c < KEY_COLUMNS; ++c) {
    const uint offset = lane + c * VKF_MASK_TILES_WORKGROUP_SIZE;  // key within the word's keys
    if (first_key + c * VKF_MASK_TILES_WORKGROUP_SIZE < pc.keys && open[c]) bits |= 1u << (offset / VKF_MASK_TILE_KEYS);
  }
  // An order-independent OR. Workgroup scope: the default, device scope, needs
  // vulkanMemoryModelDeviceScope where a Context enables the Vulkan memory model.
  if (bits != 0) atomicOr(open_blocks, bits, gl_ScopeWorkgroup, 0, 0);
  barrier();
  if (lane == 0) summary[(mask_head * gl_NumWorkGroups.y + row_block) * gl_NumWorkGroups.x + word] = open_blocks;
}
