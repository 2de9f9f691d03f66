#include "attention/mask_shape.h"

#include <algorithm>
#include <vector>

#include "common/shader_interface.h"

namespace vkflash::attention {
namespace {

// The most rows one sequence has: the largest step of the offsets.
uint32_t LongestSequence(const std::vector<int32_t>& offsets) {
  int64_t longest = 0;
  for (size_t i = 1; i < offsets.size(); ++i) longest = std::max<int64_t>(longest, int64_t(offsets[i]) - offsets[i - 1]);
  return uint32_t(longest);
}

}  // namespace

uint32_t MaskShape::mask_batch() const { return dims & VKF_MASK_HAS_BATCH ? batch : 1; }
uint32_t MaskShape::mask_heads() const { return dims & VKF_MASK_HAS_HEADS ? heads : 1; }
uint32_t MaskShape::mask_rows() const { return dims & VKF_MASK_HAS_ROWS ? q_len : 1; }
uint32_t MaskShape::mask_keys() const { return dims & VKF_MASK_HAS_KEYS ? kv_len : 1; }
uint64_t MaskShape::elements() const { return uint64_t(mask_batch()) * mask_heads() * mask_rows() * mask_keys(); }

MaskShape MaskShapeOf(const AttentionParams& params) {
  const AttentionMask& mask = params.mask;
  MaskShape shape;
  shape.batch = params.shape.batch;
  shape.heads = params.shape.q_heads;
  shape.q_len = params.cu_seqlens_q.empty() ? params.shape.q_len : LongestSequence(params.cu_seqlens_q);
  shape.kv_len = params.cu_seqlens_k.empty() ? params.shape.kv_len : LongestSequence(params.cu_seqlens_k);
  shape.dims = (mask.batch ? VKF_MASK_HAS_BATCH : 0u) | (mask.heads ? VKF_MASK_HAS_HEADS : 0u) |
               (mask.rows ? VKF_MASK_HAS_ROWS : 0u) | (mask.keys ? VKF_MASK_HAS_KEYS : 0u);
  return shape;
}

}  // namespace vkflash::attention
