// Shared by the C++ engine and the GLSL shaders: push-constant layouts, specialization-constant
// ids and descriptor bindings. Keep it plain C/GLSL: no C++ beyond the guarded block.
#ifndef VKFLASH_SHADER_INTERFACE_H
#define VKFLASH_SHADER_INTERFACE_H

#ifdef __cplusplus
#include <cstdint>
namespace vkflash::gpu {
using uint = std::uint32_t;
#endif

// Specialization constant ids (every attention kernel uses the same ids).
#define VKF_SPEC_WORKGROUP_SIZE 0
#define VKF_SPEC_HEAD_DIM 1
#define VKF_SPEC_BLOCK_Q 2
#define VKF_SPEC_BLOCK_KV 3
#define VKF_SPEC_THREADS_PER_ROW 4
// The band of keys a row sees (common/attention_mask.glsl): whether its right side is bounded (at
// AttentionPush.window_right keys past the diagonal; causal: 0) and whether its left side is.
#define VKF_SPEC_WINDOW_RIGHT 5
#define VKF_SPEC_WRITE_LSE 6
#define VKF_SPEC_INSTRUMENT 7  // forward: write per-tile statistics (the tile viewer)
#define VKF_SPEC_NAIVE_PASS 8  // naive baseline: which of its three passes
// Cooperative-matrix kernels: the subgroup size they were built for, and the accumulator layout
// the engine's probe found (see shaders/coopmat/coopmat.glsl).
#define VKF_SPEC_SUBGROUP_SIZE 9
#define VKF_SPEC_CM_ROWS_PER_LANE 10   // distinct rows among a lane's accumulator elements
#define VKF_SPEC_CM_SLOTS_LO 11        // slot of elements 0..7, 4 bits each
#define VKF_SPEC_CM_SLOTS_HI 12        // slot of elements 8..15
#define VKF_SPEC_CM_ROW_LANE_MASK 13   // lanes l and l ^ m (m within the mask) hold the same rows
// Workgroup-scope (VK_NV_cooperative_matrix2) kernels: columns of their row-vector matrices, the
// device's matrix granularity.
#define VKF_SPEC_CM2_STAT_COLUMNS 14
// Scalar kernels: the pass runs in chunks (AttentionPush.chunk_begin/end), each dispatch resuming
// from the state the last one stored in the workspace (see VKF_*_BINDING_*_STATE).
#define VKF_SPEC_CHUNKED 15
// Backward preprocess: also zero the float32 dQ sums that a dK/dV kernel built with atomic dQ adds
// to (calls with deterministic = false).
#define VKF_SPEC_ZERO_DQ_SUMS 16
#define VKF_SPEC_WINDOW_LEFT 17
// Score modifiers (common/score_mod.glsl): the logit softcap (a float, natural units; 0: none),
// ALiBi's slopes (VKF_ALIBI_*) and whether each row's softmax holds its head's sink logit.
#define VKF_SPEC_SOFTCAP 18
#define VKF_SPEC_ALIBI 19
#define VKF_SPEC_SINKS 20
// The mask / bias over the scores (common/score_mod.glsl): its element type (VKF_MASK_*) and which
// of its dimensions [B, Hq, Nq, Nk] it has (VKF_MASK_HAS_* bits; the others are 1, broadcast).
#define VKF_SPEC_MASK 21
#define VKF_SPEC_MASK_DIMS 22
// Subgroup-scope cooperative-matrix kernels: 1 where the layout probe found a float16 A operand laid
// out like the float32 accumulator (element i of every lane at the same row and column), so that
// an accumulator becomes an A operand by an element copy in registers (coopmat/coopmat_tiles.glsl).
#define VKF_SPEC_CM_A_LIKE_ACC 23
// The decode kernels: 1 where they skip the steps a mask closes by the mask's block summary (made by
// a pass before them), 0 where they find them from the mask's own elements (the register kernel two
// steps ahead, the tensor-core kernel before its loop), where that pass would cost more
// (decode_backend.h).
#define VKF_SPEC_MASK_SUMMARY 24
// The decode kernels without the summary: how many of their packed rows (head-major) read mask
// terms of their own; row r uses row r % VKF_SPEC_MASK_TERM_ROWS's. 1 for a mask broadcast over
// heads and rows, q_len for one broadcast over heads, else the packed rows (decode_backend.h).
#define VKF_SPEC_MASK_TERM_ROWS 25
#define VKF_SPEC_COUNT 26
// The tensor-core decode kernel's scan of the mask: at most this many key tiles a part, one bit
// each of a uint, and this many elements an invocation (decode_backend.h says why).
#define VKF_DECODE_SCAN_MAX_TILES 32u
#define VKF_DECODE_SCAN_MAX_PER_INVOCATION 4u

// The register-tiled scalar forward's loops (scalar/attention_forward_tiled.comp), which its
// loop-budget cost counts (scalar_backend.cc): head-dim words of S per iteration, keys of the
// float16 P V per iteration (both chosen by measurement: docs/tuning-log.md, "where the scalar
// backward's time goes"), and keys per float16 partial sum of P V.
#define VKF_TILED_FORWARD_S_WORDS_PER_STEP 4
#define VKF_TILED_FORWARD_PV_KEYS_PER_STEP 8
#define VKF_TILED_FORWARD_FLOAT16_TERMS 16
// The register-tiled dQ kernel's S and dP loop (scalar/attention_backward_dq_tiled.comp): head-dim
// words per iteration (4 against 1 and 2, by measurement: docs/tuning-log.md, "where the scalar
// backward's time goes").
#define VKF_TILED_DQ_WORDS_PER_TRIP 4
// The register-tiled scalar kernels' stagers (scalar/register_tile.glsl), whose loops the same costs
// count: global words an invocation reads before it stores them, for a stager of one tensor and
// for each tensor of a stager of two.
#define VKF_STAGE_BATCH_WORDS 8
#define VKF_STAGE_PAIR_BATCH_WORDS 4

// ALiBi's slopes (float32): none, one per query head [Hq], or one per batch entry and query head
// [B, Hq]. The values of vkflash::AlibiSlopes.
#define VKF_ALIBI_NONE 0
#define VKF_ALIBI_PER_HEAD 1
#define VKF_ALIBI_PER_BATCH_HEAD 2

// The mask's elements: none, additive float32 or float16 (a bias; -inf blocks the pair), or
// boolean bytes (0 blocks the pair). The values of vkflash::MaskType.
#define VKF_MASK_NONE 0
#define VKF_MASK_FLOAT32 1
#define VKF_MASK_FLOAT16 2
#define VKF_MASK_BOOL 3
// The dimensions of [B, Hq, Nq, Nk] the mask has (AttentionPush.mask_q_len / mask_kv_len give
// Nq and Nk); it is contiguous, C order, over the ones it has.
#define VKF_MASK_HAS_BATCH 1u
#define VKF_MASK_HAS_HEADS 2u
#define VKF_MASK_HAS_ROWS 4u
#define VKF_MASK_HAS_KEYS 8u

// Forward pass storage-buffer bindings (set 0).
#define VKF_FWD_BINDING_Q 0
#define VKF_FWD_BINDING_K 1
#define VKF_FWD_BINDING_V 2
#define VKF_FWD_BINDING_O 3
#define VKF_FWD_BINDING_LSE 4
#define VKF_FWD_BINDING_STATS 5  // instrumented variant only
// Chunked forward: each row's online-softmax state between chunks, float32: O so far (before the
// division by the sum, vec4 rows of the head dim rounded up to 4), and per row the running max (in
// base 2) followed by each of its THREADS_PER_ROW invocations' share of the running sum and (the
// register-tiled kernel's compensated sums) each share's correction: VKF_FWD_ROW_STATE_FLOATS a row
// (the per-row kernel uses the first THREADS_PER_ROW + 1).
#define VKF_FWD_BINDING_O_STATE 6
#define VKF_FWD_BINDING_ROW_STATE 7
#define VKF_FWD_ROW_STATE_FLOATS(threads_per_row) (2 * (threads_per_row) + 1)
#define VKF_FWD_BINDING_SEQUENCES 8  // the sequence table (AttentionPush.sequence_table)
#define VKF_FWD_BINDING_ALIBI 9       // ALiBi's slopes (VKF_SPEC_ALIBI)
#define VKF_FWD_BINDING_SINKS 10      // the sink logits, float32 [Hq] (VKF_SPEC_SINKS)
#define VKF_FWD_BINDING_MASK 11       // the mask / bias (VKF_SPEC_MASK), read as uint words
#define VKF_FWD_BINDING_MASK_TILES 12 // workspace: the mask's block summary (VKF_MASK_TILES_*)
#define VKF_FWD_BINDING_COUNT 13

// Instrumentation: floats per (query row, key tile), in this order.
#define VKF_STATS_RUNNING_MAX 0   // m after the tile (natural log units)
#define VKF_STATS_RUNNING_SUM 1   // l after the tile
#define VKF_STATS_RESCALE 2       // exp(m_old - m_new), applied to O and l before adding the tile
#define VKF_STATS_TILE_MAX 3      // the row's max score in the tile (natural log units)
#define VKF_STATS_TILE_SUM 4      // the row's sum of exp(S - m_new) over the tile
#define VKF_STATS_FLOATS 5

// Naive baseline (benchmarks, cross-checks): S = scale Q K^T into an Nq x Nk buffer, softmax in
// place, O = P V; one (batch, head) per dispatch, chosen by NaivePush.slice.
#define VKF_NAIVE_BINDING_Q 0
#define VKF_NAIVE_BINDING_K 1
#define VKF_NAIVE_BINDING_V 2
#define VKF_NAIVE_BINDING_O 3
#define VKF_NAIVE_BINDING_SCORES 4
#define VKF_NAIVE_BINDING_COUNT 5

// The backward's preprocess (delta = rowsum(dO * O)): invocations per query row, each summing
// every VKF_PREPROCESS_THREADS_PER_ROW-th column, so that a row's loads are contiguous.
#define VKF_PREPROCESS_THREADS_PER_ROW 16

// Backward storage-buffer bindings (set 0), shared by its three kernels; each declares the
// ones it uses.
#define VKF_BWD_BINDING_Q 0
#define VKF_BWD_BINDING_K 1
#define VKF_BWD_BINDING_V 2
#define VKF_BWD_BINDING_O 3
#define VKF_BWD_BINDING_LSE 4
#define VKF_BWD_BINDING_DO 5
#define VKF_BWD_BINDING_DELTA 6  // workspace: rowsum(dO * O), float32 [B, Hq, Nq]
#define VKF_BWD_BINDING_DQ 7
#define VKF_BWD_BINDING_DK 8
#define VKF_BWD_BINDING_DV 9
// Chunked gradient kernels: the float32 sums so far, [B, Hq, Nq, D] for dQ and [B, Hkv, Nk, D]
// for dK and dV (before the softmax scale). DQ_STATE also holds the dQ sums of atomic dQ, and with
// stored dS the float16 dS^T slots (coopmat2/stored_ds.glsl, VKF_STORED_DS_PAD).
#define VKF_BWD_BINDING_DQ_STATE 10
#define VKF_BWD_BINDING_DK_STATE 11
#define VKF_BWD_BINDING_DV_STATE 12
#define VKF_BWD_BINDING_SEQUENCES 13  // the sequence table (AttentionPush.sequence_table)
#define VKF_BWD_BINDING_ALIBI 14      // ALiBi's slopes (VKF_SPEC_ALIBI)
#define VKF_BWD_BINDING_SINKS 15      // the sink logits, float32 [Hq]
#define VKF_BWD_BINDING_DSINKS 16     // their gradient, float32 [Hq] (the dsinks kernel)
#define VKF_BWD_BINDING_MASK 17       // the mask / bias (VKF_SPEC_MASK), read as uint words
#define VKF_BWD_BINDING_DBIAS 18      // the bias's gradient, float32, the mask's shape (the dbias kernel)
#define VKF_BWD_BINDING_MASK_TILES 19 // workspace: the mask's block summary (VKF_MASK_TILES_*)
// Workspace of the chunked dbias kernel: each invocation's float32 sum so far, one per invocation
// of its dispatch (workgroups in dispatch order x the workgroup's invocations).
#define VKF_BWD_BINDING_DBIAS_STATE 20
#define VKF_BWD_BINDING_COUNT 21
// Stored dS (the coopmat2 backward with deterministic = false): a slot of dS^T per query head has
// rows of round_up(Nq, 8) + VKF_STORED_DS_PAD float16 values (one row per key, round_up(Nk, 8) +
// VKF_STORED_DS_PAD rows), so that every tile of up to VKF_STORED_DS_PAD rows of either kernel
// lies inside its slot.
#define VKF_STORED_DS_PAD 128
// A slot's row length (from Nq) or row count (from Nk), in float16 values.
#define VKF_STORED_DS_PADDED(n) (((n) + 7) / 8 * 8 + VKF_STORED_DS_PAD)

// The cooperative-matrix layout probe (shaders/coopmat/coopmat_layout_probe.comp): for every lane l and
// accumulator element i, the value 16 * row + column lands at float l * VKF_PROBE_STRIDE + i;
// the element count per lane at l * VKF_PROBE_STRIDE + VKF_PROBE_STRIDE - 1. The same for the
// float16 A operand follows, from float (subgroup size + l) * VKF_PROBE_STRIDE on.
#define VKF_PROBE_BINDING_OUT 0
#define VKF_PROBE_STRIDE 64

// The loop-budget probe (shaders/probes/loop_budget_probe.comp): a uint the shader writes, then four 1s
// the host writes; the push constant is the iteration count to try.
#define VKF_LOOP_PROBE_BINDING 0
#define VKF_LOOP_PROBE_ITERATIONS (1u << 20)

// The mask's block summary (shaders/scalar/attention_mask_tiles.comp, read by the mask_closes_*
// functions in common/score_mod.glsl): for each head of the mask (its batch x heads, C order) and each block of
// VKF_MASK_TILE_ROWS rows x VKF_MASK_TILE_KEYS keys of it, one bit: 1 if the mask leaves some pair
// of the block open. A head's bits are rows of blocks, each ceil(key blocks / 32) uints (block k in
// bit k % 32 of uint k / 32). A dimension the mask broadcasts has one block.
#define VKF_MASK_TILE_ROWS 16u
#define VKF_MASK_TILE_KEYS 16u
#define VKF_MASK_TILES_BINDING_MASK 0
#define VKF_MASK_TILES_BINDING_SUMMARY 1
#define VKF_MASK_TILES_BINDING_COUNT 2
#define VKF_MASK_TILES_WORKGROUP_SIZE 128u  // each workgroup: one uint, 16 rows x 512 keys (128: every device)

// The read-bandwidth probe (shaders/probes/read_stream.comp): a source of 16-byte words, and a sink
// where each workgroup writes the XOR of the words it read (16 bytes each).
#define VKF_READ_STREAM_BINDING_SOURCE 0
#define VKF_READ_STREAM_BINDING_SINK 1
#define VKF_READ_STREAM_BINDING_COUNT 2
// Where the tensors' rows are: AttentionPush.strides holds, for each tensor below, the element
// strides of its batch, head and row (sequence position) index, in that order; the head dim is
// contiguous. Row n of head h in batch b of a sequence that starts at memory row r0 (the sequence
// table's q_row0 or kv_row0; 0 without one) starts at element
//   b * strides[3 t] + h * strides[3 t + 1] + (r0 + n) * strides[3 t + 2]   (t: VKF_TENSOR_*).
// dQ, dK and dV have the strides of Q, K and V. The LSE (and the backward's delta, laid out
// alike) has a row stride of 1.
#define VKF_TENSOR_Q 0
#define VKF_TENSOR_K 1
#define VKF_TENSOR_V 2
#define VKF_TENSOR_O 3
#define VKF_TENSOR_DO 4
#define VKF_TENSOR_LSE 5
#define VKF_TENSOR_COUNT 6

// The sequence table (binding VKF_*_BINDING_SEQUENCES, read where AttentionPush.sequence_table is
// 1): per batch entry b, VKF_SEQUENCE_UINTS uints: the first memory row of its queries (in the
// Q-like tensors and the LSE), its query count, the first memory row of its keys, the keys it
// attends to, and the key rows it owns (the dK/dV rows it writes: its keys, then zeros for rows it
// owns but does not attend to). Without a table every entry is {0, q_len, 0, kv_len, kv_len}.
#define VKF_SEQUENCE_Q_ROW0 0
#define VKF_SEQUENCE_Q_LEN 1
#define VKF_SEQUENCE_KV_ROW0 2
#define VKF_SEQUENCE_KV_LEN 3
#define VKF_SEQUENCE_KV_ROWS 4
#define VKF_SEQUENCE_UINTS 5

// Push constants of every attention kernel. Forward and dQ dispatch (ceil(q_len / BLOCK_Q),
// q_heads, batch); dK/dV dispatches (ceil(kv_len / BLOCK_KV), kv_heads, batch). With a sequence
// table, q_len and kv_len are the longest sequence's (kv_len: its owned key rows), and a
// workgroup past its own sequence's rows does nothing. The chunked kernels' state in the workspace
// is laid out [batch, heads, q_len or kv_len] with these lengths.
struct AttentionPush {
  uint batch;
  uint q_heads;
  uint kv_heads;
  uint q_len;
  uint kv_len;
  float scale_log2;  // softmax scale * log2(e): the kernel works in base 2 (exp2 is the fast path)
  // Chunked kernels (VKF_SPEC_CHUNKED): the part of the loop this dispatch runs, [begin, end), in
  // keys (forward, dQ: multiples of the key tile) or in steps (dK/dV: query tiles of each head of
  // the group, head-major). The first chunk starts from nothing, the last writes the outputs.
  uint chunk_begin;
  uint chunk_end;
  // Decode kernels (shaders/decode/): keys per split-K part; workgroup x takes keys [x * split_keys,
  // (x + 1) * split_keys). Other kernels ignore it.
  uint split_keys;
  uint sequence_table;  // 1: per-batch lengths and first rows from the sequence table
  // The sliding window (read where VKF_SPEC_WINDOW_LEFT / _RIGHT say that side is bounded): row i
  // sees keys i + kv_len - q_len - window_left ..= i + kv_len - q_len + window_right.
  int window_left;
  int window_right;
  uint strides[VKF_TENSOR_COUNT * 3];
  // The mask's Nq and Nk (VKF_SPEC_MASK): the call's q_len and kv_len, or with cu_seqlens the
  // longest sequence's; a sequence's row i and key j are its element [.., i, j].
  uint mask_q_len;
  uint mask_kv_len;
};

// The mask summary's kernel: the mask's own extents of rows and keys (1 where it broadcasts), and
// the first mask head of the dispatch (its batch x heads, C order). Dispatched (words per block
// row, block rows, mask heads), in several dispatches where the heads exceed the device's z count.
struct MaskTilesPush {
  uint rows;
  uint keys;
  uint head0;
};

struct ReadStreamPush {
  uint words;  // 16-byte words of the source
};
// The naive kernels take packed [B, H, N, D] tensors, no variants, and the head dim at run time.
struct NaivePush {
  uint q_heads;
  uint kv_heads;
  uint q_len;
  uint kv_len;
  float scale_log2;
  int window_left;  // the band, as AttentionPush's
  int window_right;
  uint slice;  // batch * q_heads + head of this dispatch
  uint head_dim;
};

#ifdef __cplusplus
static_assert(sizeof(NaivePush) == 36, "push constant layout must match GLSL std430");
static_assert(sizeof(AttentionPush) == 128, "push constant layout must match GLSL std430");
}  // namespace vkflash::gpu
#endif

#endif  // VKFLASH_SHADER_INTERFACE_H
