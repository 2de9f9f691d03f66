// `vkflash info`: the Vulkan devices, their limits, and the kernels/tiles vkflash picks.
#include <cstdio>
#include <memory>
#include <string>

#include "attention_io.h"
#include "cli_error.h"
#include "commands.h"

namespace vkflash::cli {
namespace {

std::string Version(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

const char* YesNo(bool b) { return b ? "yes" : "no"; }

void PrintDevice(const DeviceInfo& d, bool selected) {
  std::printf("%s %u: %s (%s), Vulkan %s%s%s\n", selected ? "*" : " ", d.index, d.name.c_str(), DeviceTypeName(d.type),
              Version(d.api_version).c_str(), d.driver.empty() ? "" : ", driver ", d.driver.c_str());
  std::printf("    shared memory %u B, subgroup %u (%u..%u), subgroup shuffle %s, vote %s, fp16 storage %s, fp16 math %s\n",
              d.shared_memory_bytes, d.subgroup_size, d.min_subgroup_size, d.max_subgroup_size,
              YesNo(d.subgroup_shuffle_in_compute), YesNo(d.subgroup_vote_in_compute), YesNo(d.storage_buffer_16bit),
              YesNo(d.shader_float16));
  std::printf("    push descriptors %s, cooperative matrix NV %s%s / KHR %s%s, max storage buffer %llu B, "
              "workgroup <= %u invocations, timestamps %s\n",
              YesNo(d.push_descriptor), YesNo(d.nv_cooperative_matrix), d.nv_cooperative_matrix_f16 ? " (f16 16x16x16)" : "",
              YesNo(d.khr_cooperative_matrix), d.khr_cooperative_matrix_f16 ? " (f16 16x16x16)" : "",
              static_cast<unsigned long long>(d.max_storage_buffer_range), d.max_workgroup_invocations,
              d.timestamp_period_ns > 0 ? (std::to_string(d.timestamp_period_ns) + " ns/tick").c_str() : "no");
  if (d.nv_cooperative_matrix2) {
    std::string sizes;
    for (const auto& w : d.cooperative_matrix2_workgroups) {
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(w.invocations) + " (" + std::to_string(w.m_granularity) +
               "x" + std::to_string(w.n_granularity) + "x" + std::to_string(w.k_granularity) + ")";
    }
    std::printf("    cooperative matrix 2 (NV): %s", d.nv_cooperative_matrix2_f16 ? "f16 workgroup scope" : "not usable");
    if (d.nv_cooperative_matrix2_f16) {
      std::printf(", workgroups of %s (MxNxK granularity), row vectors %u wide", sizes.c_str(),
                  d.cooperative_matrix2_granularity);
      if (d.cooperative_matrix2_subgroup_granularity > 0) {
        std::printf("; f16 subgroup scope, granularity %u", d.cooperative_matrix2_subgroup_granularity);
      }
    }
    std::printf("\n");
  }
}

void PrintKernelTable(const Context& context) {
  const DeviceInfo& d = context.device_info();
  std::printf("\nvkflash uses device %u: %u B of shared memory, %s reductions, %s\n", d.index,
              d.usable_shared_memory_bytes, d.use_subgroup_ops ? "subgroup" : "shared-memory",
              d.use_push_descriptors ? "push descriptors" : "descriptor pools");
  if (d.shader_loop_budget > 0) {
    std::printf("shader loops end after %u iterations on this driver: long loops run in chunks\n",
                d.shader_loop_budget);
  }
  std::printf("tensor cores: %s%s%s%s\n", CooperativeMatrixApiName(d.cooperative_matrix),
              d.cooperative_matrix_note.empty() ? "" : " - ", d.cooperative_matrix_note.c_str(),
              d.use_cooperative_matrix2 ? "; VK_NV_cooperative_matrix2 where it applies" : "");
  std::printf("decode kernels (few query rows per KV head, float16): %s; %u compute units%s\n",
              d.use_decode_kernels ? "used where they apply" : "not used", d.compute_units,
              d.compute_units == 0 ? " (not reported: split-K assumes 16)" : "");
  std::printf("forward kernels chosen:\n  %-8s %-8s %-24s %4s %4s %11s %9s %12s\n", "head_dim", "dtype", "kernel", "Br",
              "Bc", "threads/row", "workgroup", "shared bytes");
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (uint32_t head_dim : {32u, 64u, 128u, 256u}) {
      AttentionParams params;
      params.dtype = dtype;
      params.shape.head_dim = head_dim;
      auto choice = context.ChooseForwardKernel(params);
      if (!choice.ok()) {
        std::printf("  %-8u %-8s %s\n", head_dim, DataTypeName(dtype), choice.status().message().c_str());
        continue;
      }
      // Workgroup-scope kernels: the driver may add shared memory of its own.
      const std::string shared = std::to_string(choice->shared_memory_bytes) +
                                 (choice->cooperative_matrix == CooperativeMatrixApi::kNv2 ? "+driver" : "");
      std::printf("  %-8u %-8s %-24s %4u %4u %11u %9u %12s\n", head_dim, DataTypeName(dtype), choice->kernel.c_str(),
                  choice->block_q, choice->block_kv, choice->threads_per_row, choice->workgroup_size, shared.c_str());
    }
  }
}

}  // namespace

Command AddInfoCommand(CLI::App& parent) {
  auto device = std::make_shared<std::string>();
  CLI::App* app = parent.add_subcommand("info", "List Vulkan devices, their limits and the kernels vkflash picks");
  app->add_option("--device", *device, "Device index or name substring (default: VKFLASH_DEVICE, else the best)");
  return {app, [device]() {
            auto devices = EnumerateDevices();
            if (!devices.ok()) return ReportError(devices.status());
            auto context = OpenContext(*device);
            std::printf("vkflash %s\nVulkan devices (* = the one vkflash uses):\n", VKFLASH_VERSION);
            for (const DeviceInfo& d : *devices) {
              PrintDevice(d, context.ok() && d.index == (*context)->device_info().index);
            }
            if (!context.ok()) return ReportError(context.status());
            PrintKernelTable(**context);
            return kExitOk;
          }};
}

}  // namespace vkflash::cli
