// vkflash diagnostics: GPU timing for benchmarks, the naive attention baseline, and the sizes of
// the instrumented forward's per-tile statistics (the tile viewer). Not needed to run attention.
#pragma once

#include <vkflash/device_info.hpp>
#include <vkflash/vkflash.hpp>

#include <functional>
#include <vector>

namespace vkflash {

// Bytes of ForwardBuffers::stats for `shape` with the kernel `choice` (its block_kv): take the
// choice from ChooseForwardKernel(params, /*with_stats=*/true).
uint64_t ForwardStatsBytes(const AttentionShape& shape, const KernelChoice& choice);

// Bytes of the scores scratch of the naive baseline (Context::RecordNaiveForward): Nq * Nk floats.
inline uint64_t NaiveScoresBytes(const AttentionShape& shape) { return uint64_t(shape.q_len) * shape.kv_len * 4; }

// The naive baseline, not FlashAttention: S = scale Q K^T into `scores` (NaiveScoresBytes),
// softmax in place, O = P V, one (batch, head) after another: O(N^2) memory traffic. For
// benchmarks and cross-checks; writes O only (buffers.lse and .stats are ignored). Needs kv_len > 0.
// Barriers as for Context::RecordForward; `scores` is both written and read.
Status RecordNaiveForward(Context& context, VkCommandBuffer cmd, const AttentionParams& params,
                          const ForwardBuffers& buffers, const BufferView& scores);

// For benchmarks: records `record` `runs` times into one submission on the context's queue, each
// run between timestamp queries and followed by a full barrier, and returns each run's GPU time in
// milliseconds. kUnsupported where the queue has no timestamps.
Result<std::vector<double>> MeasureGpuTime(Context& context, const std::function<Status(VkCommandBuffer)>& record,
                                           uint32_t runs);

}  // namespace vkflash
