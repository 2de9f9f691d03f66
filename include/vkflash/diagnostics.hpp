// vkflash diagnostics: GPU timing for benchmarks, the naive attention baseline, and the sizes of
// the instrumented forward's per-tile statistics (the tile viewer). Not needed to run attention.
#pragma once

#include <vkflash/device_info.hpp>
#include <vkflash/vkflash.hpp>

#include <functional>
#include <span>
#include <vector>

namespace vkflash {

// The instrumented forward (the tile viewer's): besides O and LSE, the kernel writes into `stats`,
// for every query row i and every key tile t it visits, 5 floats at float index
// ((((b * Hq + h) * Nq + i) * T + t) * 5), T = ceil(Nk / block_kv): the running max m (natural log
// units), the running sum l, the rescale factor exp(m_old - m_new), the row's max score in the
// tile, and the row's sum of exp(S - m) over the tile. Tiles a row never visits (causal, outside a
// window, or closed entirely by a mask) are not written. Only the scalar kernel is instrumented: it
// runs, whatever Context::ChooseForwardKernel() says for the plain call.

// Bytes of `stats` for `shape` with the kernel `choice` (its block_kv): take the choice from
// ChooseInstrumentedForwardKernel().
VKFLASH_API uint64_t ForwardStatsBytes(const AttentionShape& shape, const KernelChoice& choice);

// The kernel and tiles the instrumented forward runs with here.
VKFLASH_API Result<KernelChoice> ChooseInstrumentedForwardKernel(const Context& context, const AttentionParams& params);
// Bytes of ForwardBuffers::workspace it needs here (as Context::ForwardWorkspaceBytes).
VKFLASH_API Result<uint64_t> InstrumentedForwardWorkspaceBytes(const Context& context, const AttentionParams& params);
// Records it: as Context::RecordForward, and `stats` (written, like O) as above.
VKFLASH_API Status RecordInstrumentedForward(Context& context, VkCommandBuffer cmd, const AttentionParams& params,
                                 const ForwardBuffers& buffers, const BufferView& stats);
// ...on the context's queue, then waits (as Context::Forward).
VKFLASH_API Status InstrumentedForward(Context& context, const AttentionParams& params, const ForwardBuffers& buffers,
                           const BufferView& stats);

// Bytes of the scores scratch of the naive baseline (Context::RecordNaiveForward): Nq * Nk floats.
inline uint64_t NaiveScoresBytes(const AttentionShape& shape) { return uint64_t(shape.q_len) * shape.kv_len * 4; }

// The naive baseline, not FlashAttention: S = scale Q K^T into `scores` (NaiveScoresBytes),
// softmax in place, O = P V, one (batch, head) after another: O(N^2) memory traffic. For
// benchmarks and cross-checks; writes O only (buffers.lse is ignored). Needs kv_len > 0.
// Barriers as for Context::RecordForward; `scores` is both written and read.
VKFLASH_API Status RecordNaiveForward(Context& context, VkCommandBuffer cmd, const AttentionParams& params,
                          const ForwardBuffers& buffers, const BufferView& scores);

// The device's read bandwidth over these bytes, for benchmarks: reads every 16-byte word of each
// source once (one dispatch per source, none waiting for another). Each workgroup writes the XOR of
// the words it read to 16 bytes of `sink` (ReadStreamSinkBytes; bytes between the parts are left
// as they were): over a zeroed sink, the XOR of all its 16-byte words is the XOR of the sources'.
// A decode step must read K and V once: timed over the same buffers, this is its ceiling.
// Sources: multiples of 16 bytes. Barriers as for Context::RecordForward.
VKFLASH_API uint64_t ReadStreamSinkBytes(const Context& context, std::span<const BufferView> sources);
VKFLASH_API Status RecordReadStream(Context& context, VkCommandBuffer cmd, std::span<const BufferView> sources,
                        const BufferView& sink);

// For benchmarks: records `record` `runs` times into one submission on the context's queue, each
// run between timestamp queries and followed by a full barrier, and returns each run's GPU time in
// milliseconds. kUnsupported where the queue has no timestamps.
VKFLASH_API Result<std::vector<double>> MeasureGpuTime(Context& context, const std::function<Status(VkCommandBuffer)>& record,
                                           uint32_t runs);

}  // namespace vkflash
