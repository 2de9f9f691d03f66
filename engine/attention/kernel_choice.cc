#include "attention/kernel_choice.h"

#include <string>

#include "attention/backends/kernel_backend.h"
#include "attention/backends/scalar_backend.h"
#include "common/shader_interface.h"
#include "util/ceil_div.h"

namespace vkflash::attention {
namespace {

Status CheckDtype(const DeviceInfo& device, DataType dtype) {
  if (dtype == DataType::kFloat16 && !device.storage_buffer_16bit) {
    return Status::Error(ErrorCode::kUnsupported,
                         "float16 tensors need storageBuffer16BitAccess, which '" + device.name + "' lacks");
  }
  return Status::Ok();
}

void NameFamily(const KernelBackend& backend, KernelChoice* choice) { choice->family = backend.name(); }
void NameFamily(const KernelBackend& backend, BackwardKernelChoice* choice) {
  NameFamily(backend, &choice->dkdv);
  NameFamily(backend, &choice->dq);
}

// The first family that applies and fits; a tensor-core family whose tiles do not fit (e.g. too
// little shared memory) gives way to the next, and the last one's error is the answer.
template <typename Choice, typename Choose>
Result<Choice> FirstThatFits(const DeviceInfo& device, const AttentionParams& params, bool scalar_only,
                             const Choose& choose) {
  if (Status s = CheckDtype(device, params.dtype); !s.ok()) return s;
  const auto backends = KernelBackends();
  for (size_t i = 0; i < backends.size(); ++i) {
    const bool last = i + 1 == backends.size();
    if (!last && (scalar_only || !backends[i]->Applies(device, params))) continue;
    Result<Choice> choice = choose(*backends[i]);
    if (choice.ok()) NameFamily(*backends[i], &*choice);
    if (choice.ok() || last) return choice;
  }
  return Status::Error(ErrorCode::kUnsupported, "no kernel family");  // KernelBackends() is never empty
}

}  // namespace

Result<KernelChoice> ChooseForwardKernel(const DeviceInfo& device, const AttentionParams& params, bool scalar_only,
                                         const TileOverrides& overrides) {
  return FirstThatFits<KernelChoice>(device, params, scalar_only, [&](const KernelBackend& backend) {
    // scalar_only: instrumented, or views the vector loads cannot take: the per-row kernel.
    return scalar_only ? ChoosePerRowForward(device, params, overrides) : backend.ChooseForward(device, params, overrides);
  });
}

Result<BackwardKernelChoice> ChooseBackwardKernels(const DeviceInfo& device, const AttentionParams& params,
                                                   bool scalar_only, const TileOverrides& overrides) {
  return FirstThatFits<BackwardKernelChoice>(device, params, scalar_only, [&](const KernelBackend& backend) {
    // scalar_only: views the vector loads cannot take: the per-row kernels.
    return scalar_only ? ChoosePerRowBackward(device, params) : backend.ChooseBackward(device, params, overrides);
  });
}

uint32_t ComputeUnitsOrAssumed(const DeviceInfo& device) { return device.compute_units > 0 ? device.compute_units : 16; }

// Fewer, larger workgroups: on the H100 256 invocations ran the preprocess faster than 64 at D=64
// (0.6x the time) and as fast at D=128.
uint32_t PreprocessWorkgroupSize(const DeviceInfo& device) {
  static_assert(128 % VKF_PREPROCESS_THREADS_PER_ROW == 0, "whole rows per workgroup");
  return device.max_workgroup_invocations >= 256 ? 256 : 128;
}

KernelChoice PreprocessChoice(const DeviceInfo& device, const AttentionParams& params) {
  KernelChoice choice;
  choice.kernel = std::string("backward_preprocess_") + (params.dtype == DataType::kFloat16 ? "f16" : "f32");
  choice.workgroup_size = PreprocessWorkgroupSize(device);
  choice.threads_per_row = VKF_PREPROCESS_THREADS_PER_ROW;
  choice.block_q = choice.workgroup_size / VKF_PREPROCESS_THREADS_PER_ROW;
  return choice;
}

KernelChoice DsinksChoice(const DeviceInfo& device) {
  KernelChoice choice;
  choice.kernel = "backward_dsinks";
  choice.workgroup_size = PreprocessWorkgroupSize(device);  // a power of two, as its tree sum needs
  return choice;
}

KernelChoice DbiasChoice(const AttentionParams& params) {
  KernelChoice choice;
  choice.kernel = std::string("backward_dbias_") + (params.dtype == DataType::kFloat16 ? "f16" : "f32");
  choice.block_q = 8;  // 8 x 16 elements: 128 invocations, what every device runs
  choice.block_kv = 16;
  choice.workgroup_size = choice.block_q * choice.block_kv;
  return choice;
}

// Every loop of shaders/scalar/attention_backward_dbias.comp counted at its longest: per step of
// its walk, the step itself and the mask's summary words, and per 32 head-dim columns the staging of
// Q, dO, K and V and the 32 products; once, the sum of the invocations that map to one element.
LoopCost DbiasLoopCost(const KernelChoice& dbias, uint32_t head_dim) {
  const uint64_t columns = 32;
  const uint64_t staging = CeilDiv(uint64_t(dbias.block_q) * columns, dbias.workgroup_size) +
                           CeilDiv(uint64_t(dbias.block_kv) * columns, dbias.workgroup_size);
  LoopCost cost;
  cost.fixed = uint64_t(dbias.block_q) * dbias.block_kv + 8;
  cost.per_step = 1 + 2 + CeilDiv(head_dim, columns) * (1 + staging + columns);
  return cost;
}

KernelChoice DqFromSumsChoice(const DeviceInfo& device, const AttentionParams& params) {
  KernelChoice choice = PreprocessChoice(device, params);
  choice.kernel = std::string("backward_dq_from_sums_") + (params.dtype == DataType::kFloat16 ? "f16" : "f32");
  return choice;
}

}  // namespace vkflash::attention
