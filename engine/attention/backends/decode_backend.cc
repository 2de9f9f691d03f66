#include "attention/backends/decode_backend.h"

#include <algorithm>
#include <bit>
#include <string>

#include "attention/backends/coopmat2_backend.h"
#include "attention/kernel_choice.h"
#include "util/ceil_div.h"
#include "util/status_macros.h"
#include "vulkan/shader_library.h"

namespace vkflash::attention {
namespace {

constexpr std::string_view kVariants[] = {"decode"};
constexpr const char* kRegisterKernel = "forward_f16_decode";  // up to kDecodeMaxRows packed rows
constexpr uint32_t kWorkgroupSize = 128;
// Below this many keys per part, the merge's reads of every part's O cost more than the split gains.
constexpr uint32_t kMinSplitKeys = 256;
// Workgroups per compute unit to aim for: enough loads in flight to cover memory latency, few
// parts to merge (the sweeps behind 2: docs/tuning-log.md).
constexpr uint32_t kWorkgroupsPerComputeUnit = 2;
constexpr uint32_t kMaxSplits = 4096;

// Every loop of attention_forward_decode.comp at its longest (chunk_plan.h), with each lane's own
// keys and the levels of its reduce-scatter counted at their most (keys, bit_width(t)).
LoopCost DecodeLoopCost(const KernelChoice& choice, uint32_t head_dim) {
  const uint64_t t = choice.threads_per_row, rows = choice.block_q, words = head_dim / 8 / t;
  const uint64_t groups = choice.workgroup_size / t, keys = choice.block_kv / groups;
  const uint64_t levels = std::bit_width(t);
  LoopCost cost;
  cost.per_step = 2 * keys * words +                           // the next step's loads
                  keys * (words + rows * (2 * words + 1)) +    // K's words unpacked, the partial dot products
                  (2 + levels) * keys * (rows + 1) +           // scatter, gather, butterfly levels
                  rows * (keys + levels) +                     // the own keys' scores, the max over lanes
                  rows * (2 * words + keys) +                  // O rescaled, the own keys' P
                  keys * words * (rows + 1) +                  // P V
                  3 * keys + 1 +                               // the loaded words moved, the loop
                  3 * keys * (rows + 1) + levels;              // the mask's terms read, voted on, moved
  cost.fixed = keys * words + rows * (words + 2 * words + 1) + rows * (levels + 1) + rows * (3 * groups + 1) +
               3 * keys * (rows + 1) + levels +  // the first two steps' mask terms, the first vote
               groups * (rows * words * 2 + 1) +
               rows * head_dim / 8 / choice.workgroup_size + 1;
  return cost;
}

uint64_t PackedRows(const AttentionShape& s) { return uint64_t(s.q_heads / s.kv_heads) * s.q_len; }

}  // namespace

std::span<const std::string_view> DecodeBackend::variants() const { return kVariants; }

std::string DecodeBackend::WhyUnusable(const DeviceInfo& device, std::string_view) const {
  if (!device.use_subgroup_ops) return "the decode kernels need subgroup operations";
  if (!device.subgroup_vote_in_compute) return "the decode kernels need subgroup votes";
  if (!device.storage_buffer_16bit) return "the decode kernels need storageBuffer16BitAccess";
  if (vk::FindShader(kRegisterKernel) == nullptr) return "this build has no decode kernels";
  return "";
}

bool DecodeBackend::Applies(const DeviceInfo& device, const AttentionParams& params) const {
  const AttentionShape& s = params.shape;
  if (!device.use_decode_kernels || params.dtype != DataType::kFloat16 || s.head_dim % 8 != 0 || s.head_dim > 256) {
    return false;
  }
  // More rows than the register kernel holds: the tensor-core kernel, built with the coopmat2
  // family's; ChooseCoopmat2DecodeTile checks the head dim against the device's matrices, and
  // where no tile fits the next family runs the call.
  const uint64_t rows = PackedRows(s);
  return rows <= kDecodeMaxRows || (rows <= kDecodeMaxTensorCoreRows && device.use_cooperative_matrix2);
}

Result<KernelChoice> DecodeBackend::ChooseForward(const DeviceInfo& device, const AttentionParams& params,
                                                  const TileOverrides& overrides) const {
  const uint32_t head_dim = params.shape.head_dim, words = head_dim / 8;
  const uint32_t rows = uint32_t(PackedRows(params.shape));
  if (rows > kDecodeMaxRows) return ChooseCoopmat2DecodeTile(device, head_dim, rows, overrides);
  // The largest power of two that divides the row's words, fits the smallest subgroup, and at most 16.
  uint32_t t = 1;
  while (t < 16 && words % (2 * t) == 0 && 2 * t <= device.min_subgroup_size) t *= 2;
  const uint32_t groups = kWorkgroupSize / t;
  // Keys a group reads per step (twice that in flight, the loads being pipelined), against registers:
  // at most 8 uvec4 words of K per invocation and step (D = 256 or an odd D / 8 holds more per key).
  // 8 / words_per_key is 8, 4, 2, 1 or 0 (clamped to 1): the shader's reduce-scatter takes powers
  // of two (t too, at most 16).
  const uint32_t words_per_key = words / t;
  const uint32_t keys_per_step = std::clamp(8 / words_per_key, 1u, rows <= 4 ? 8u : 4u);
  KernelChoice choice;
  choice.kernel = kRegisterKernel;
  choice.block_q = rows;
  choice.block_kv = groups * keys_per_step;
  choice.threads_per_row = t;
  choice.workgroup_size = kWorkgroupSize;
  choice.subgroup_reductions = true;
  // The merge: each group's max and sum per row, and O of every row.
  choice.shared_memory_bytes = 4 * (2 * groups * rows + rows * head_dim);
  if (kWorkgroupSize > device.max_workgroup_invocations || kWorkgroupSize % device.max_subgroup_size != 0 ||
      choice.shared_memory_bytes > device.usable_shared_memory_bytes) {
    return Status::Error(ErrorCode::kUnsupported, "the decode kernel does not fit '" + device.name + "'");
  }
  // Its parts split the keys to keep within a loop budget, but its merge of the groups' rows comes
  // on top of every part, and the merge pass takes only so many parts: where either does not fit,
  // the next family runs the call.
  if (!OneStepFits(device, DecodeLoopCost(choice, head_dim))) {
    return Status::Error(ErrorCode::kUnsupported, "the decode kernel's step does not fit this driver's loop budget");
  }
  VKF_RETURN_IF_ERROR(PlanDecodeSplits(device, params, choice, overrides).status());
  return choice;
}

void DecodeBackend::SetSpecConstants(const KernelChoice& choice, const CoopmatLayout&, SpecConstants* spec) const {
  if (choice.cooperative_matrix == CooperativeMatrixApi::kNv2) (*spec)[VKF_SPEC_CM2_STAT_COLUMNS] = choice.matrix_granularity;
}

Result<BackwardKernelChoice> DecodeBackend::ChooseBackward(const DeviceInfo&, const AttentionParams&,
                                                           const TileOverrides&) const {
  return Status::Error(ErrorCode::kUnsupported, "the decode kernels are forward only");
}

Result<DecodeSplits> PlanDecodeSplits(const DeviceInfo& device, const AttentionParams& params,
                                      const KernelChoice& choice, const TileOverrides& overrides) {
  const AttentionShape& s = params.shape;
  DecodeSplits plan;
  if (s.kv_len == 0) {
    plan.split_keys = choice.block_kv;
    return plan;
  }
  uint32_t splits = std::min(overrides.decode_splits, kMaxSplits);
  if (splits == 0) {
    const uint64_t groups = uint64_t(s.kv_heads) * s.batch;
    // Rounded down: a few workgroups past what the device holds at once would run as a second wave
    // (H100, B = 8: 5 parts of 320 workgroups ran 25% slower than 4 of 256).
    splits = uint32_t(std::max<uint64_t>(1, uint64_t(ComputeUnitsOrAssumed(device)) * kWorkgroupsPerComputeUnit / groups));
    splits = std::min(splits, std::max(1u, s.kv_len / kMinSplitKeys));
  }
  splits = std::clamp(splits, 1u, uint32_t(CeilDiv(s.kv_len, choice.block_kv)));
  plan.split_keys = uint32_t(CeilDiv(CeilDiv(s.kv_len, splits), choice.block_kv) * choice.block_kv);
  // Within the loop budget: no part longer than half of it allows (the tensor-core kernel runs only
  // where the Context has no budget: family_choice.h).
  if (choice.cooperative_matrix == CooperativeMatrixApi::kNone) {
    const uint64_t steps = CeilDiv(s.kv_len, choice.block_kv);
    VKF_ASSIGN_OR_RETURN(const ChunkPlan budget,
                         PlanChunks(device, DecodeLoopCost(choice, s.head_dim), steps, choice.block_kv));
    plan.split_keys = std::min(plan.split_keys, budget.length);
  }
  plan.splits = uint32_t(CeilDiv(s.kv_len, plan.split_keys));
  // The merge's loops: each invocation's every (workgroup / quads)-th part, then the lanes twice.
  const uint64_t split_lanes = kCombineWorkgroupSize / (s.head_dim / 4);
  const uint64_t merge_iterations = CeilDiv(plan.splits, split_lanes) + 2 * split_lanes;
  if (plan.splits > kMaxSplits ||
      (device.shader_loop_budget > 0 && merge_iterations > device.shader_loop_budget / 2)) {
    return Status::Error(ErrorCode::kUnsupported, "kv_len " + std::to_string(s.kv_len) + " needs " +
                                                      std::to_string(plan.splits) +
                                                      " split-K parts, more than the merge can take here");
  }
  return plan;
}

bool DecodeReadsMaskSummary(const KernelChoice& choice, uint32_t split_keys, uint32_t term_rows) {
  const uint64_t steps = CeilDiv(split_keys, choice.block_kv);  // the tensor-core kernel's key tiles
  if (choice.kernel == kRegisterKernel) return steps > kMaskTermsMaxSteps;
  return steps > VKF_DECODE_SCAN_MAX_TILES ||
         uint64_t(term_rows) * split_keys > uint64_t(kMaskScanMaxPerInvocation) * choice.workgroup_size;
}

uint32_t DecodeMaskTermRows(const CallLayout& call) {
  if (call.planning.mask.type == MaskType::kNone) return 1;
  if ((call.mask.dims & VKF_MASK_HAS_HEADS) != 0 || !call.uniform_q_len) {
    return uint32_t(std::max<uint64_t>(1, PackedRows(call.planning.shape)));  // at most BLOCK_Q
  }
  return (call.mask.dims & VKF_MASK_HAS_ROWS) != 0 ? std::max(1u, call.planning.shape.q_len) : 1u;
}

uint64_t DecodePartialOBytes(const AttentionShape& shape, uint32_t splits) {
  return shape.lse_elements() * splits * shape.head_dim * sizeof(float);
}
uint64_t DecodePartialLseBytes(const AttentionShape& shape, uint32_t splits) {
  return shape.lse_elements() * splits * sizeof(float);
}

}  // namespace vkflash::attention
