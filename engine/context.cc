// vkflash::Context: owns (or adopts) the device and everything made on it, and implements the
// public calls by handing them to the pieces under engine/vulkan and engine/attention.
#include <vkflash/diagnostics.hpp>
#include <vkflash/vkflash.hpp>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <utility>

#include "context_options.h"
#include "attention/backward_op.h"
#include "attention/coopmat_layout.h"
#include "attention/forward_op.h"
#include "attention/loop_budget.h"
#include "attention/naive_op.h"
#include "attention/read_stream_op.h"
#include "attention/family_choice.h"
#include "attention/kernel_choice.h"
#include "device_selection.h"
#include "util/status_macros.h"
#include "vulkan/barriers.h"
#include "vulkan/command_runner.h"
#include "vulkan/device.h"
#include "vulkan/device_caps.h"
#include "vulkan/gpu_timer.h"
#include "vulkan/instance.h"
#include "vulkan/memory.h"
#include "vulkan/pipeline_store.h"
#include "vulkan/shader_library.h"

namespace vkflash {

// Members are destroyed bottom-up: operators, pipelines and the runner before the device, the
// device before the instance. Hidden: a nested class takes the exported Context's visibility.
struct VKFLASH_INTERNAL Context::Impl {
  ContextOptions options;
  DeviceInfo info;
  std::unique_ptr<vk::Instance> instance;  // null when adopted
  std::unique_ptr<vk::Device> device;
  std::unique_ptr<vk::CommandRunner> runner;
  std::unique_ptr<vk::PipelineStore> pipelines;
  std::unique_ptr<attention::ForwardOperator> forward;
  std::unique_ptr<attention::BackwardOperator> backward;
  std::unique_ptr<attention::NaiveOperator> naive;
  std::unique_ptr<attention::ReadStreamOperator> read_stream;
  attention::CoopmatLayout coopmat_layout;  // valid when info.cooperative_matrix != kNone

  // Builds everything that sits on top of `device`.
  Status InitOnDevice() {
    VKF_ASSIGN_OR_RETURN(runner, vk::CommandRunner::Create(*device));
    VKF_ASSIGN_OR_RETURN(pipelines, vk::PipelineStore::Create(*device, info, options.pipeline_cache_path));
    VKF_RETURN_IF_ERROR(ProbeLoopBudget());
    VKF_RETURN_IF_ERROR(ProbeCooperativeMatrixLayout());
    VKF_ASSIGN_OR_RETURN(forward, attention::ForwardOperator::Create(*device, info, options.tile_overrides,
                                                                     coopmat_layout, *pipelines));
    VKF_ASSIGN_OR_RETURN(backward, attention::BackwardOperator::Create(*device, info, options.tile_overrides,
                                                                       coopmat_layout, *pipelines));
    VKF_ASSIGN_OR_RETURN(naive, attention::NaiveOperator::Create(*device, info, *pipelines));
    VKF_ASSIGN_OR_RETURN(read_stream, attention::ReadStreamOperator::Create(*device, info, *pipelines));
    return Status::Ok();
  }

  // A driver that ends loops after a budget runs the scalar kernels in chunks and the decode kernels
  // in parts; the tensor-core kernels have neither, so they are not used there (an explicit
  // "coopmat*" family fails).
  Status ProbeLoopBudget() {
    VKF_ASSIGN_OR_RETURN(info.shader_loop_budget, attention::ProbeLoopBudget(*device, *runner, *pipelines));
    const uint32_t cap = options.max_loop_iterations;
    if (cap != 0) info.shader_loop_budget = info.shader_loop_budget == 0 ? cap : std::min(info.shader_loop_budget, cap);
    if (info.shader_loop_budget == 0 || !attention::UsesFamilyPastLoopBudget(info)) return Status::Ok();
    const std::string why = "this driver ends shader loops after " + std::to_string(info.shader_loop_budget) +
                            " iterations; only the scalar and decode kernels keep within that";
    if (attention::AsksForFamilyPastLoopBudget(options.kernels)) return Status::Error(ErrorCode::kUnsupported, why);
    attention::KeepFamiliesWithinLoopBudget(&info);
    info.cooperative_matrix_note = why;
    return Status::Ok();
  }

  // The tensor-core kernels need the accumulator layout: a device whose probe fails runs the
  // scalar kernels (an explicit "coopmat*" kernel family fails instead).
  Status ProbeCooperativeMatrixLayout() {
    if (info.cooperative_matrix == CooperativeMatrixApi::kNone) return Status::Ok();
    auto layout = attention::ProbeCoopmatLayout(*device, *runner, *pipelines, info.cooperative_matrix, info.subgroup_size);
    // KHR kernels without the element copy convert P through shared memory: where the NV kernels
    // run too and the family was not named, they take over (their driver-side conversion ran
    // faster than the scratch at head dim 64 on the H100).
    if (layout.ok() && info.cooperative_matrix == CooperativeMatrixApi::kKhr && !layout->a_like_accumulator &&
        options.kernels != "coopmat_khr" && info.nv_cooperative_matrix_f16 && vk::FindShader("coopmat_probe_nv")) {
      auto nv_layout = attention::ProbeCoopmatLayout(*device, *runner, *pipelines, CooperativeMatrixApi::kNv,
                                                     info.subgroup_size);
      if (nv_layout.ok()) {
        info.cooperative_matrix = CooperativeMatrixApi::kNv;
        layout = nv_layout;
      }
    }
    if (layout.ok()) {
      coopmat_layout = *layout;
      const bool khr = info.cooperative_matrix == CooperativeMatrixApi::kKhr;
      info.cooperative_matrix_a_copy = khr && layout->a_like_accumulator;
      char note[200];
      std::snprintf(note, sizeof(note),
                    "accumulator layout: %u elements and %u rows per lane, row lanes differ in mask 0x%x, slots "
                    "0x%08x%08x%s",
                    layout->elements_per_lane, layout->rows_per_lane, layout->row_lane_mask, layout->slots_hi,
                    layout->slots_lo,
                    !khr                             ? ""
                    : info.cooperative_matrix_a_copy ? "; P to A by an element copy"
                                                     : "; P to A through shared memory");
      info.cooperative_matrix_note = note;
      return Status::Ok();
    }
    if (options.kernels != "auto") return layout.status();
    info.cooperative_matrix = CooperativeMatrixApi::kNone;
    info.cooperative_matrix_note = layout.status().message();
    return Status::Ok();
  }

  Status Transfer(const BufferView& view, size_t bytes, bool upload, void* host);
  // Forward() and InstrumentedForward(): a workspace where needed and none is given, then wait.
  Status RunForward(Context& context, const AttentionParams& params, const ForwardBuffers& buffers,
                    const BufferView& stats);

  // Forward() and Backward(): records `record(cmd, workspace)` between full barriers and waits.
  // Where `workspace` is empty, one of workspace_bytes() bytes (if any) is made for the call and
  // freed (and forgotten by the descriptor caches) when it returns.
  template <typename WorkspaceBytes, typename Record>
  Status RunOnce(Context& context, BufferView workspace, const WorkspaceBytes& workspace_bytes, const Record& record) {
    Buffer scratch;
    if (workspace.empty()) {
      VKF_ASSIGN_OR_RETURN(const uint64_t bytes, workspace_bytes());
      if (bytes > 0) {
        VKF_ASSIGN_OR_RETURN(scratch, context.CreateBuffer(bytes));
        workspace = scratch.view();
      }
    }
    return runner->Run([&](VkCommandBuffer cmd) {
      vk::FullBarrier(cmd);
      VKF_RETURN_IF_ERROR(record(cmd, workspace));
      vk::FullBarrier(cmd);
      return Status::Ok();
    });
  }
};

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Context::~Context() {
  if (!impl_) return;
  if (impl_->pipelines && !impl_->options.pipeline_cache_path.empty()) {
    (void)impl_->pipelines->Save(impl_->options.pipeline_cache_path);  // best effort: a cache is optional
  }
}

Result<std::unique_ptr<Context>> Context::Create(const ContextOptions& requested) {
  auto impl = std::make_unique<Impl>();
  VKF_ASSIGN_OR_RETURN(impl->options, ResolveContextOptions(requested));
  const ContextOptions& options = impl->options;
  VKF_ASSIGN_OR_RETURN(impl->instance, vk::Instance::Create(options.enable_validation, options.message_callback));

  std::vector<VkPhysicalDevice> handles;
  VKF_ASSIGN_OR_RETURN(auto devices, ProbeAllDevices(*impl->instance, &handles));
  VKF_ASSIGN_OR_RETURN(const uint32_t index, SelectDevice(devices, options.device_selector));
  impl->info = devices[index];
  if (impl->info.api_version < VK_API_VERSION_1_1) {
    return Status::Error(ErrorCode::kUnsupported, "device '" + impl->info.name + "' only supports Vulkan 1.0");
  }
  vk::ApplyLimits(options, &impl->info);
  VKF_RETURN_IF_ERROR(attention::ChooseKernelFamily(options.kernels, &impl->info));
  VKF_ASSIGN_OR_RETURN(impl->device, vk::Device::Create(handles[index], impl->info, options.pipeline_statistics));
  VKF_RETURN_IF_ERROR(impl->InitOnDevice());
  return std::unique_ptr<Context>(new Context(std::move(impl)));
}

Result<std::unique_ptr<Context>> Context::Adopt(const ExternalDevice& external, const ContextOptions& requested) {
  if (external.physical_device == VK_NULL_HANDLE) {
    return Status::Error(ErrorCode::kInvalidArgument, "ExternalDevice.physical_device is VK_NULL_HANDLE");
  }
  if (external.api_version < VK_API_VERSION_1_1) {
    return Status::Error(ErrorCode::kUnsupported, "vkflash needs an instance created for Vulkan 1.1 or newer");
  }
  auto impl = std::make_unique<Impl>();
  VKF_ASSIGN_OR_RETURN(impl->options, ResolveContextOptions(requested));
  const ContextOptions& options = impl->options;
  impl->info = vk::ProbeDevice(external.instance, external.api_version, external.physical_device, 0);
  // Only what the engine enabled on its device may be used.
  const auto enabled = [&](uint32_t features) { return (external.enabled & features) == features; };
  DeviceInfo& info = impl->info;
  info.storage_buffer_16bit = info.storage_buffer_16bit && enabled(kAdoptedStorageBuffer16Bit);
  info.use_push_descriptors = info.push_descriptor && enabled(kAdoptedPushDescriptor);
  info.use_float16_arithmetic = info.use_float16_arithmetic && enabled(kAdoptedShaderFloat16);
  info.use_float32_atomic_add = info.use_float32_atomic_add && enabled(kAdoptedShaderAtomicFloat32Add);
  info.nv_cooperative_matrix_f16 = info.nv_cooperative_matrix_f16 && enabled(kAdoptedCooperativeMatrixNv);
  info.khr_cooperative_matrix_f16 = info.khr_cooperative_matrix_f16 && enabled(kAdoptedCooperativeMatrixKhr);
  info.nv_cooperative_matrix2_f16 =
      info.nv_cooperative_matrix2_f16 && enabled(kAdoptedCooperativeMatrix2Nv | kAdoptedCooperativeMatrixKhr);
  vk::ApplyLimits(options, &impl->info);
  VKF_RETURN_IF_ERROR(attention::ChooseKernelFamily(options.kernels, &impl->info));
  VKF_ASSIGN_OR_RETURN(impl->device, vk::Device::Adopt(external, impl->info));
  VKF_RETURN_IF_ERROR(impl->InitOnDevice());
  return std::unique_ptr<Context>(new Context(std::move(impl)));
}

const DeviceInfo& Context::device_info() const { return impl_->info; }
VkDevice Context::device() const { return impl_->device->handle(); }

Result<Buffer> Context::CreateBuffer(VkDeviceSize bytes) {
  if (bytes == 0) return Status::Error(ErrorCode::kInvalidArgument, "CreateBuffer needs bytes > 0");
  VKF_ASSIGN_OR_RETURN(vk::ScopedBuffer scoped,
                       vk::ScopedBuffer::Create(*impl_->device, bytes,
                                                VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                                VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT));
  Buffer buffer;
  buffer.owner_ = this;
  buffer.size_ = bytes;
  scoped.Release(&buffer.buffer_, &buffer.memory_);
  return buffer;
}

Status Context::Impl::Transfer(const BufferView& view, size_t bytes, bool upload, void* host) {
  if (view.buffer == VK_NULL_HANDLE) return Status::Error(ErrorCode::kInvalidArgument, "transfer to a null buffer");
  if (bytes > view.size) {
    return Status::Error(ErrorCode::kInvalidArgument, "transfer of " + std::to_string(bytes) +
                                                          " bytes does not fit a view of " + std::to_string(view.size));
  }
  if (bytes == 0) return Status::Ok();
  VKF_ASSIGN_OR_RETURN(vk::ScopedBuffer staging,
                       vk::ScopedBuffer::Create(*device, bytes,
                                                upload ? VK_BUFFER_USAGE_TRANSFER_SRC_BIT : VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                                VK_MEMORY_PROPERTY_HOST_CACHED_BIT));
  if (upload) std::memcpy(staging.mapped(), host, bytes);
  VKF_RETURN_IF_ERROR(runner->Run([&](VkCommandBuffer cmd) {
    // Earlier work on the device buffer (any stage) completes before the copy touches it.
    vk::FullBarrier(cmd);
    VkBufferCopy region{};
    region.size = bytes;
    if (upload) {
      region.dstOffset = view.offset;
      vkCmdCopyBuffer(cmd, staging.buffer(), view.buffer, 1, &region);
      vk::FullBarrier(cmd);
    } else {
      region.srcOffset = view.offset;
      vkCmdCopyBuffer(cmd, view.buffer, staging.buffer(), 1, &region);
      vk::MemoryBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                        VK_ACCESS_HOST_READ_BIT);
    }
    return Status::Ok();
  }));
  if (!upload) std::memcpy(host, staging.mapped(), bytes);
  return Status::Ok();
}

Status Context::Upload(const BufferView& dst, const void* src, size_t bytes) {
  return impl_->Transfer(dst, bytes, true, const_cast<void*>(src));
}

Status Context::Download(const BufferView& src, void* dst, size_t bytes) {
  return impl_->Transfer(src, bytes, false, dst);
}

Result<KernelChoice> Context::ChooseForwardKernel(const AttentionParams& params) const {
  return impl_->forward->Choose(params);
}

Status Context::RecordForward(VkCommandBuffer cmd, const AttentionParams& params, const ForwardBuffers& buffers) {
  if (cmd == VK_NULL_HANDLE) return Status::Error(ErrorCode::kInvalidArgument, "command buffer is VK_NULL_HANDLE");
  return impl_->forward->Record(cmd, params, buffers);
}

Result<uint64_t> Context::ForwardWorkspaceBytes(const AttentionParams& params) const {
  return impl_->forward->WorkspaceBytes(params, /*with_stats=*/false);
}

Status Context::Forward(const AttentionParams& params, const ForwardBuffers& buffers) {
  return impl_->RunForward(*this, params, buffers, /*stats=*/{});
}

Status Context::Impl::RunForward(Context& context, const AttentionParams& params, const ForwardBuffers& buffers,
                                 const BufferView& stats) {
  auto workspace_bytes = [&]() -> Result<uint64_t> {
    if (params.shape.q_elements() == 0) return uint64_t{0};
    return forward->WorkspaceBytes(params, /*with_stats=*/!stats.empty());
  };
  return RunOnce(context, buffers.workspace, workspace_bytes, [&](VkCommandBuffer cmd, const BufferView& workspace) {
    ForwardBuffers with_workspace = buffers;
    with_workspace.workspace = workspace;
    return forward->Record(cmd, params, with_workspace, stats);
  });
}

Result<BackwardKernelChoice> Context::ChooseBackwardKernels(const AttentionParams& params) const {
  return impl_->backward->Choose(params);
}

Status Context::RecordBackward(VkCommandBuffer cmd, const AttentionParams& params, const BackwardBuffers& buffers) {
  if (cmd == VK_NULL_HANDLE) return Status::Error(ErrorCode::kInvalidArgument, "command buffer is VK_NULL_HANDLE");
  return impl_->backward->Record(cmd, params, buffers);
}

Result<uint64_t> Context::BackwardWorkspaceBytes(const AttentionParams& params) const {
  return impl_->backward->WorkspaceBytes(params);
}

Status Context::Backward(const AttentionParams& params, const BackwardBuffers& buffers) {
  VKF_RETURN_IF_ERROR(ValidateAttentionParams(params));
  auto workspace_bytes = [&] { return BackwardWorkspaceBytes(params); };
  return impl_->RunOnce(*this, buffers.workspace, workspace_bytes, [&](VkCommandBuffer cmd, const BufferView& workspace) {
    BackwardBuffers with_workspace = buffers;
    with_workspace.workspace = workspace;
    return impl_->backward->Record(cmd, params, with_workspace);
  });
}

Status Context::SavePipelineCache(const std::string& path) {
  return impl_->pipelines->Save(path.empty() ? impl_->options.pipeline_cache_path : path);
}

uint64_t Context::allocated_bytes() const { return impl_->device->allocated_bytes(); }
uint64_t Context::peak_allocated_bytes() const { return impl_->device->peak_allocated_bytes(); }
void Context::ResetPeakAllocatedBytes() { impl_->device->ResetPeak(); }

PipelineCacheState Context::pipeline_cache_state() const { return impl_->pipelines->state(); }
size_t Context::pipeline_count() const { return impl_->pipelines->pipeline_count(); }

void Context::ForgetBuffer(VkBuffer buffer) {
  impl_->forward->Forget(buffer);
  impl_->backward->Forget(buffer);
  impl_->naive->Forget(buffer);
  impl_->read_stream->Forget(buffer);
}

// ---- Buffer ----

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Buffer::~Buffer() { Release(); }

void Buffer::Release() {
  if (owner_ == nullptr) return;
  owner_->ForgetBuffer(buffer_);
  vk::FreeBufferAndMemory(*owner_->impl_->device, buffer_, memory_, size_);
  owner_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  size_ = 0;
}

// diagnostics.hpp: free functions that reach the Context's operators through this friend.
class ContextInternals {
 public:
  static const Context::Impl& Of(const Context& context) { return *context.impl_; }
  static Context::Impl& Of(Context& context) { return *context.impl_; }
};

Status RecordNaiveForward(Context& context, VkCommandBuffer cmd, const AttentionParams& params,
                          const ForwardBuffers& buffers, const BufferView& scores) {
  if (cmd == VK_NULL_HANDLE) return Status::Error(ErrorCode::kInvalidArgument, "command buffer is VK_NULL_HANDLE");
  return ContextInternals::Of(context).naive->Record(cmd, params, buffers, scores);
}

uint64_t ReadStreamSinkBytes(const Context& context, std::span<const BufferView> sources) {
  return ContextInternals::Of(context).read_stream->SinkBytes(sources);
}

Status RecordReadStream(Context& context, VkCommandBuffer cmd, std::span<const BufferView> sources,
                        const BufferView& sink) {
  if (cmd == VK_NULL_HANDLE) return Status::Error(ErrorCode::kInvalidArgument, "command buffer is VK_NULL_HANDLE");
  return ContextInternals::Of(context).read_stream->Record(cmd, sources, sink);
}

Result<std::vector<double>> MeasureGpuTime(Context& context, const std::function<Status(VkCommandBuffer)>& record,
                                           uint32_t runs) {
  const auto& impl = ContextInternals::Of(context);
  return vk::TimeOnGpu(*impl.device, impl.info, *impl.runner, record, runs);
}

Result<KernelChoice> ChooseInstrumentedForwardKernel(const Context& context, const AttentionParams& params) {
  VKF_RETURN_IF_ERROR(ValidateAttentionParams(params));
  return attention::ChooseForwardKernel(context.device_info(), params, /*scalar_only=*/true);
}

Result<uint64_t> InstrumentedForwardWorkspaceBytes(const Context& context, const AttentionParams& params) {
  return ContextInternals::Of(context).forward->WorkspaceBytes(params, /*with_stats=*/true);
}

Status RecordInstrumentedForward(Context& context, VkCommandBuffer cmd, const AttentionParams& params,
                                 const ForwardBuffers& buffers, const BufferView& stats) {
  if (cmd == VK_NULL_HANDLE) return Status::Error(ErrorCode::kInvalidArgument, "command buffer is VK_NULL_HANDLE");
  if (stats.empty()) return Status::Error(ErrorCode::kInvalidArgument, "the instrumented forward needs a stats buffer");
  return ContextInternals::Of(context).forward->Record(cmd, params, buffers, stats);
}

Status InstrumentedForward(Context& context, const AttentionParams& params, const ForwardBuffers& buffers,
                           const BufferView& stats) {
  if (stats.empty()) return Status::Error(ErrorCode::kInvalidArgument, "the instrumented forward needs a stats buffer");
  return ContextInternals::Of(context).RunForward(context, params, buffers, stats);
}

}  // namespace vkflash
