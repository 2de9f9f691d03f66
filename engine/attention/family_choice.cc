#include "attention/family_choice.h"

#include "vulkan/shader_library.h"

namespace vkflash::attention {

Status ChooseKernelFamily(const std::string& family, DeviceInfo* info) {
  // The tensor-core kernels reduce rows with subgroup shuffles.
  const bool nv = info->use_subgroup_ops && info->nv_cooperative_matrix_f16 && vk::FindShader("coopmat_probe_nv") != nullptr;
  const bool khr = info->use_subgroup_ops && info->khr_cooperative_matrix_f16 && vk::FindShader("coopmat_probe_khr") != nullptr;
  auto unsupported = [&](const std::string& what) {
    return Status::Error(ErrorCode::kUnsupported, "kernels '" + family + "': " + what + " on '" + info->name + "'");
  };
  // The workgroup-scope kernels need neither shuffles nor a fixed subgroup size.
  const bool nv2 = info->nv_cooperative_matrix2_f16 && vk::FindShader("forward_f16_coopmat2") != nullptr;
  const CooperativeMatrixApi subgroup_api =
      nv ? CooperativeMatrixApi::kNv : khr ? CooperativeMatrixApi::kKhr : CooperativeMatrixApi::kNone;
  info->cooperative_matrix = CooperativeMatrixApi::kNone;
  info->use_cooperative_matrix2 = false;
  if (family == "scalar") {
    info->cooperative_matrix_note = "scalar kernels asked for";
  } else if (family == "coopmat2") {
    if (!nv2) {
      return unsupported(info->nv_cooperative_matrix2_f16
                             ? "this build has no VK_NV_cooperative_matrix2 kernel (glslang >= 14 needed)"
                             : "VK_NV_cooperative_matrix2 kernels cannot run");
    }
    info->use_cooperative_matrix2 = true;
    info->cooperative_matrix = subgroup_api;  // where the workgroup-scope kernels do not apply
  } else if (family == "auto" || family == "coopmat") {
    info->cooperative_matrix = subgroup_api;
    info->use_cooperative_matrix2 = nv2;
    if (!nv && !khr && !nv2) {
      if (family == "coopmat") return unsupported("no usable cooperative-matrix extension");
      info->cooperative_matrix_note = info->nv_cooperative_matrix || info->khr_cooperative_matrix
                                          ? "the device lacks a feature the kernels need (or this build lacks them)"
                                          : "no cooperative-matrix extension";
    }
  } else if (family == "coopmat_nv") {
    if (!nv) {
      return unsupported(info->nv_cooperative_matrix_f16 && !info->use_subgroup_ops
                             ? "VK_NV_cooperative_matrix kernels need subgroup operations"
                             : "VK_NV_cooperative_matrix kernels cannot run");
    }
    info->cooperative_matrix = CooperativeMatrixApi::kNv;
  } else if (family == "coopmat_khr") {
    if (!khr) {
      return unsupported(!info->khr_cooperative_matrix_f16 ? "VK_KHR_cooperative_matrix kernels cannot run"
                         : !info->use_subgroup_ops ? "VK_KHR_cooperative_matrix kernels need subgroup operations"
                                                   : "this build has no VK_KHR_cooperative_matrix kernels (glslang >= 13 needed)");
    }
    info->cooperative_matrix = CooperativeMatrixApi::kKhr;
  } else {
    return Status::Error(ErrorCode::kInvalidArgument,
                         "kernels '" + family + "': expected auto, scalar, coopmat, coopmat_nv, coopmat_khr or coopmat2");
  }
  return Status::Ok();
}

}  // namespace vkflash::attention
