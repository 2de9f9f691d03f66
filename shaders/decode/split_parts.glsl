// The split-K parts of a decode call in the workspace: the decode kernels write them, and
// decode/attention_decode_combine.comp merges them. Per (query row, part): the row's normalized O
// over the part's keys (float32, HEAD_DIM / 4 vec4) and its base-2 LSE (-inf: the part saw no key
// of the row). Rows are indexed [batch, q_heads, q_len] with the longest sequence's q_len (the push
// constants'), parts in key order. Needs the push constants (common/attention_preamble.glsl).
#ifndef VKFLASH_DECODE_SPLIT_PARTS_GLSL
#define VKFLASH_DECODE_SPLIT_PARTS_GLSL

// Declares o_part[] and lse_part[] with the access qualifier `access` (writeonly / readonly).
#define VKF_DECLARE_SPLIT_PARTS(access)                                                                  \
  layout(std430, set = 0, binding = VKF_FWD_BINDING_O_STATE) access buffer o_part_block { vec4 o_part[]; }; \
  layout(std430, set = 0, binding = VKF_FWD_BINDING_ROW_STATE) access buffer lse_part_block { float lse_part[]; };

// Parts per row: pc.split_keys keys each.
uint split_part_count() { return (pc.kv_len + pc.split_keys - 1) / pc.split_keys; }

// The index of part 0 of query row n of `head` in `batch` (of lse_part; times HEAD_DIM / 4, of o_part).
uint first_part_of_row(uint batch, uint head, uint n, uint parts) { return ((batch * pc.q_heads + head) * pc.q_len + n) * parts; }

#endif
