// Shared-memory arrays of the attention kernels: element counts, from the specialization-constant
// inputs. Shared by the GLSL (the `shared` declarations) and the C++ engine (how many bytes a tile
// needs, to pick tiles that fit), so that the two cannot drift apart. Keep it plain C/GLSL: macros
// only, every argument parenthesized.
//
// Element types (bytes in C++): vec4 and uvec4 16, float and uint 4, float16_t 2. Arguments named
// after derived quantities (head_vec4, stride, row_u4, tile_stride) take the row-size macros below,
// which the shaders also use for their named constants, so each formula is written once.
#ifndef VKFLASH_SHARED_MEMORY_SIZES_H
#define VKFLASH_SHARED_MEMORY_SIZES_H

// --- Row sizes ---
// Scalar kernels: a row in vec4 words, the head dim padded with zeros to a multiple of 4 (one
// 128-bit shared load feeds four multiply-adds).
#define VKF_HEAD_VEC4(head_dim) (((head_dim) + 3) / 4)
// ...and the row stride of their streamed tiles: odd, so that lanes reading different rows of the
// same column hit different banks.
#define VKF_ODD_STRIDE(head_vec4) ((head_vec4) | 1u)
// Tensor-core kernels: a float16 row in uvec4 words (8 halves; the head dim is a multiple of 16)...
#define VKF_ROW_U4(head_dim) ((head_dim) / 8)
// ...and the stride of a staged row: one word more, an odd count, so that the 8 rows of one matrix
// load hit 8 different banks (common/stage_rows.glsl).
#define VKF_TILE_STRIDE(row_u4) ((row_u4) + 1)

// --- Every family ---
// One float per query row of a tile (its LSE in base 2, its delta).
#define VKF_SMEM_ROW_FLOATS(rows) (rows)

// --- Scalar kernels (scalar/) ---
// `owned` rows stay for the whole pass, `streamed` rows are the tile of each step: forward, owned
// = BLOCK_Q, streamed = BLOCK_KV; dK/dV, owned = BLOCK_KV, streamed = BLOCK_Q; dQ, owned = BLOCK_Q,
// streamed = BLOCK_KV.
// vec4: the owned rows of one tensor (forward: Q; dK/dV: K, V; dQ: Q, dO), unpadded.
#define VKF_SMEM_OWNED_VEC4S(owned, head_vec4) ((owned) * (head_vec4))
// vec4: the streamed rows of one tensor (forward: K, then V; dK/dV: Q, dO; dQ: K, V), at stride
// VKF_ODD_STRIDE.
#define VKF_SMEM_STREAMED_VEC4S(streamed, stride) ((streamed) * (stride))
// float: one score per (owned row, streamed row) of the step (forward: S, then P; dK/dV: P^T,
// dS^T; dQ: dS).
#define VKF_SMEM_SCORE_FLOATS(owned, streamed) ((owned) * (streamed))
// float: one per invocation, where the row reductions go through shared memory
// (scalar/row_reduce.glsl with VKF_SUBGROUP_OPS = 0: the forward's "_shared" variants, the
// backward preprocess).
#define VKF_SMEM_ROW_REDUCE_FLOATS(workgroup_size) (workgroup_size)

// --- Register-tiled scalar forward (scalar/attention_forward_tiled.comp) ---
// A row of 16-byte words (8 halves where scalar/register_tile.glsl keeps them, else 4 floats; the
// _kf32 variants' K tile always floats; the head dim is a multiple of 8), at an odd stride as above.
#define VKF_TILED_ROW_WORDS(head_dim, word_cols) ((head_dim) / (word_cols))
// words: the Q tile (BLOCK_Q rows), and each of the K and V tiles (BLOCK_KV rows).
#define VKF_SMEM_TILED_WORDS(rows, stride) ((rows) * (stride))
// P, one element per (query row, key): float16 with float16 products, else float. The row
// stride is padded by 4 bytes so that the rows a warp's invocations read at once hit different banks.
#define VKF_TILED_P_STRIDE(block_kv, element_bytes) ((block_kv) + 4 / (element_bytes))
#define VKF_SMEM_TILED_P_ELEMENTS(block_q, p_stride) ((block_q) * (p_stride))
// uint: with float16 products, the largest |value| of each V row of the step and of the V tile.
#define VKF_SMEM_TILED_ABS_MAX_UINTS(block_kv) ((block_kv) + 1)

// --- Register-tiled scalar backward (scalar/attention_backward_{dkdv,dq}_tiled.comp) ---
// Rows of 16-byte words as above (8 halves for float16 tensors, else 4 floats): dK/dV keeps K and
// V (BLOCK_KV rows) and stages Q and dO (BLOCK_Q); dQ keeps Q and dO and stages K and V.
// A score per (owned row, streamed row) of the step (dK/dV: P^T and dS^T; dQ: dS), in one of two
// arrays (scalar/score_tile.glsl); the other has one element. by_owned_row is
// VKF_TILED_SCORES_BY_OWNED_ROW of the invocations' owned rows (1 unless a multiple of 4).
#define VKF_TILED_SCORES_BY_OWNED_ROW(rows_per_thread) (((rows_per_thread) % 4u + 3u) / 4u)
// float, by owned row: the row stride one more than the streamed rows, so that the owned rows a
// warp reads at once hit different banks.
#define VKF_TILED_SCORE_STRIDE(streamed) ((streamed) + 1u)
#define VKF_SMEM_TILED_SCORE_FLOATS(owned, score_stride, by_owned_row) \
  ((by_owned_row) * (owned) * (score_stride) + 1u - (by_owned_row))
// vec4, by streamed row: 4 owned rows a vec4, the row stride odd (as VKF_ODD_STRIDE), so that the
// 8 streamed rows a quarter of a warp writes at once hit different banks (where a row group has 8
// or more invocations, as the tables' tiles do).
#define VKF_TILED_SCORE_ROW_VEC4S(owned) (((owned) / 4u) | 1u)
#define VKF_SMEM_TILED_SCORE_VEC4S(streamed, row_vec4s, by_owned_row) \
  ((1u - (by_owned_row)) * (streamed) * (row_vec4s) + (by_owned_row))

// uint: the tiles a mask closes along a loop (common/closed_tiles.glsl), one bit each for 32 words
// of tiles, and the first tile's index.
#define VKF_SMEM_CLOSED_TILE_WORDS 32
#define VKF_SMEM_CLOSED_TILE_UINTS (VKF_SMEM_CLOSED_TILE_WORDS + 1)

// --- Tensor-core kernels (coopmat/, coopmat2/) ---
// uvec4: the staged rows of two tensors of one tile, `rows` each (the forwards' and dQ kernels' K
// and V).
#define VKF_SMEM_ROW_PAIR_U4(rows, tile_stride) (2 * (rows) * (tile_stride))
// uint: per row of a streamed tile, the step at which its staging last zeroed an inf or NaN
// (common/nonfinite.glsl): the backward kernels, dK/dV per query row, dQ per key row.
#define VKF_SMEM_NONFINITE_STEPS(rows) (rows)
// uint: the forward's nonfinite_v and dK/dV's nonfinite_do, one flag each.
#define VKF_SMEM_NONFINITE_FLAG_UINTS 1
// uint: the tensor-core decode kernel's open key tiles of its part, one bit each (at most 32).
#define VKF_SMEM_OPEN_TILE_BITS_UINTS 1

// coopmat/ (subgroup scope). float: the coordinate matrix (coopmat/coopmat_tiles.glsl, and the
// layout probe).
#define VKF_SMEM_CM_COORD_FLOATS 256
// uvec4: a 16 x 16 float16 block per subgroup, that row blocks of Q, dO, O, dQ, dK and dV pass
// through, and (KHR) an accumulator on its way to an A operand.
#define VKF_SMEM_CM_BLOCK_SCRATCH_U4(subgroups) ((subgroups) * 32)

// dK/dV (coopmat/ and coopmat2/): rows [0, BLOCK_KV) hold V; the region after them first K (BLOCK_KV
// rows), then each step's Q and dO rows (2 BLOCK_Q): as many rows as the larger of the two.
#define VKF_SMEM_DKDV_STREAM_ROWS(block_q, block_kv) ((2 * (block_q) > (block_kv)) ? 2 * (block_q) : (block_kv))
// uvec4: the whole staging array, V rows then that region.
#define VKF_SMEM_DKDV_TILES_U4(block_kv, stream_rows, tile_stride) (((block_kv) + (stream_rows)) * (tile_stride))
// uvec4: with atomic dQ, the step's dS^T in float16: block_kv rows of block_q, padded as above.
#define VKF_SMEM_CM2_DS_TILE_U4(block_kv, block_q) ((block_kv) * VKF_TILE_STRIDE((block_q) / 8))
// uvec4: dQ from stored dS (coopmat2/attention_backward_dq_from_ds_coopmat2.comp): each of its two
// staged tiles, the step's K rows and its dS^T rows (block_kv keys of the tile's queries), block_kv
// rows of `stride` words (padded as above).
#define VKF_SMEM_CM2_DQ_FROM_DS_ROWS_U4(block_kv, stride) ((block_kv) * (stride))

#endif  // VKFLASH_SHARED_MEMORY_SIZES_H
