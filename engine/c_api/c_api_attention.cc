// The C API's attention calls (include/vkflash/vkflash.h): parameters, kernel choices,
// workspaces, forward and backward, each handed to the C++ API inside the boundary's guard.
#include <vkflash/device_info.hpp>
#include <vkflash/vkflash.h>

#include "c_api/c_api_boundary.h"
#include "c_api/c_api_convert.h"
#include "c_api/c_api_handles.h"
#include "util/status_macros.h"

namespace vkflash::c_api {
namespace {

// The C++ params of a call (checked for NULL, struct_size and enums, not yet for the contract).
Result<AttentionParams> Params(const VkfAttentionParams* params) {
  VKF_RETURN_IF_ERROR(RequireNonNull({{params, "params"}}));
  AttentionParams converted;
  VKF_RETURN_IF_ERROR(ToAttentionParams(*params, &converted));
  return converted;
}

// The context's C++ object, and the params of a call on it.
Result<AttentionParams> ContextAndParams(VkfContext context, const VkfAttentionParams* params) {
  if (context == nullptr || context->context == nullptr) {
    return Status::Error(ErrorCode::kInvalidArgument, "context is NULL");
  }
  return Params(params);
}

}  // namespace
}  // namespace vkflash::c_api

using namespace vkflash;
using namespace vkflash::c_api;

extern "C" {

// ---- Parameters ----

VkfResult vkfValidateAttentionParams(const VkfAttentionParams* params) {
  return Guarded([&]() -> Status {
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, Params(params));
    return ValidateAttentionParams(p);
  });
}

VkfResult vkfVisiblePairs(const VkfAttentionParams* params, uint64_t* pairs) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{pairs, "pairs"}}));
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, Params(params));
    *pairs = VisiblePairs(p);
    return Status::Ok();
  });
}

VkfResult vkfMaskElements(const VkfAttentionParams* params, uint64_t* elements) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{elements, "elements"}}));
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, Params(params));
    *elements = MaskElements(p);
    return Status::Ok();
  });
}

VkfResult vkfMaskBytes(const VkfAttentionParams* params, uint64_t* bytes) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{bytes, "bytes"}}));
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, Params(params));
    *bytes = MaskBytes(p);
    return Status::Ok();
  });
}

VkfResult vkfMaskBroadcastShape(const VkfAttentionParams* params, uint32_t shape[4]) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{shape, "shape"}}));
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, Params(params));
    const std::array<uint32_t, 4> broadcast = MaskBroadcastShape(p);
    for (size_t i = 0; i < broadcast.size(); ++i) shape[i] = broadcast[i];
    return Status::Ok();
  });
}

VkfResult vkfPackedStrides(VkfTensorLayout layout, uint32_t heads, uint32_t rows, uint32_t head_dim,
                           VkfTensorStrides* strides) {
  return Guarded([&]() -> Status {
    VKF_RETURN_IF_ERROR(RequireNonNull({{strides, "strides"}}));
    TensorLayout cpp_layout;
    VKF_RETURN_IF_ERROR(ToTensorLayout(layout, &cpp_layout));
    *strides = ToVkfTensorStrides(PackedStrides(cpp_layout, heads, rows, head_dim));
    return Status::Ok();
  });
}

// ---- Kernel choices and workspaces ----

VkfResult vkfChooseForwardKernel(VkfContext context, const VkfAttentionParams* params, VkfKernelChoice* choice) {
  return Guarded([&]() -> Status {
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, ContextAndParams(context, params));
    VKF_RETURN_IF_ERROR(RequireNonNull({{choice, "choice"}}));
    VKF_ASSIGN_OR_RETURN(const KernelChoice chosen, context->context->ChooseForwardKernel(p));
    return WriteKernelChoice(chosen, choice);
  });
}

VkfResult vkfChooseBackwardKernels(VkfContext context, const VkfAttentionParams* params, VkfKernelChoice* dkdv,
                                   VkfKernelChoice* dq, VkBool32* atomic_dq) {
  return Guarded([&]() -> Status {
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, ContextAndParams(context, params));
    VKF_RETURN_IF_ERROR(RequireNonNull({{dkdv, "dkdv"}, {dq, "dq"}}));
    VKF_ASSIGN_OR_RETURN(const BackwardKernelChoice chosen, context->context->ChooseBackwardKernels(p));
    VKF_RETURN_IF_ERROR(WriteKernelChoice(chosen.dkdv, dkdv));
    VKF_RETURN_IF_ERROR(WriteKernelChoice(chosen.dq, dq));
    if (atomic_dq != nullptr) *atomic_dq = chosen.atomic_dq ? VK_TRUE : VK_FALSE;
    return Status::Ok();
  });
}

VkfResult vkfForwardWorkspaceBytes(VkfContext context, const VkfAttentionParams* params, uint64_t* bytes) {
  return Guarded([&]() -> Status {
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, ContextAndParams(context, params));
    VKF_RETURN_IF_ERROR(RequireNonNull({{bytes, "bytes"}}));
    VKF_ASSIGN_OR_RETURN(*bytes, context->context->ForwardWorkspaceBytes(p));
    return Status::Ok();
  });
}

VkfResult vkfBackwardWorkspaceBytes(VkfContext context, const VkfAttentionParams* params, uint64_t* bytes) {
  return Guarded([&]() -> Status {
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, ContextAndParams(context, params));
    VKF_RETURN_IF_ERROR(RequireNonNull({{bytes, "bytes"}}));
    VKF_ASSIGN_OR_RETURN(*bytes, context->context->BackwardWorkspaceBytes(p));
    return Status::Ok();
  });
}

// ---- Forward and backward ----

VkfResult vkfRecordForward(VkfContext context, VkCommandBuffer command_buffer, const VkfAttentionParams* params,
                           const VkfForwardBuffers* buffers) {
  return Guarded([&]() -> Status {
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, ContextAndParams(context, params));
    VKF_RETURN_IF_ERROR(RequireNonNull({{command_buffer, "command_buffer"}, {buffers, "buffers"}}));
    ForwardBuffers views;
    VKF_RETURN_IF_ERROR(ToForwardBuffers(*buffers, &views));
    return context->context->RecordForward(command_buffer, p, views);
  });
}

VkfResult vkfForward(VkfContext context, const VkfAttentionParams* params, const VkfForwardBuffers* buffers) {
  return Guarded([&]() -> Status {
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, ContextAndParams(context, params));
    VKF_RETURN_IF_ERROR(RequireNonNull({{buffers, "buffers"}}));
    ForwardBuffers views;
    VKF_RETURN_IF_ERROR(ToForwardBuffers(*buffers, &views));
    return context->context->Forward(p, views);
  });
}

VkfResult vkfRecordBackward(VkfContext context, VkCommandBuffer command_buffer, const VkfAttentionParams* params,
                            const VkfBackwardBuffers* buffers) {
  return Guarded([&]() -> Status {
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, ContextAndParams(context, params));
    VKF_RETURN_IF_ERROR(RequireNonNull({{command_buffer, "command_buffer"}, {buffers, "buffers"}}));
    BackwardBuffers views;
    VKF_RETURN_IF_ERROR(ToBackwardBuffers(*buffers, &views));
    return context->context->RecordBackward(command_buffer, p, views);
  });
}

VkfResult vkfBackward(VkfContext context, const VkfAttentionParams* params, const VkfBackwardBuffers* buffers) {
  return Guarded([&]() -> Status {
    VKF_ASSIGN_OR_RETURN(const AttentionParams p, ContextAndParams(context, params));
    VKF_RETURN_IF_ERROR(RequireNonNull({{buffers, "buffers"}}));
    BackwardBuffers views;
    VKF_RETURN_IF_ERROR(ToBackwardBuffers(*buffers, &views));
    return context->context->Backward(p, views);
  });
}

}  // extern "C"
