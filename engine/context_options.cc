#include "context_options.h"

#include "util/environment.h"

namespace vkflash {
namespace {

Status FillNumber(const char* variable, uint32_t* value) {
  if (*value != 0) return Status::Ok();
  std::string error;
  *value = env::PositiveInteger(variable, &error).value_or(0);
  if (!error.empty()) return Status::Error(ErrorCode::kInvalidArgument, error);
  return Status::Ok();
}

void FillText(const char* variable, std::string* value, const std::string& fallback = "") {
  if (value->empty()) *value = env::Get(variable).value_or(fallback);
}

}  // namespace

Result<ContextOptions> ResolveContextOptions(const ContextOptions& options) {
  ContextOptions resolved = options;
  resolved.device_selector = ResolveDeviceSelector(options.device_selector);
  FillText("VKFLASH_KERNELS", &resolved.kernels, "auto");
  if (Status s = FillNumber("VKFLASH_MAX_SHARED_BYTES", &resolved.max_shared_bytes); !s.ok()) return s;
  if (Status s = FillNumber("VKFLASH_MAX_LOOP_ITERATIONS", &resolved.max_loop_iterations); !s.ok()) return s;
  resolved.disable_subgroup_ops = options.disable_subgroup_ops || env::Flag("VKFLASH_DISABLE_SUBGROUP_OPS");
  resolved.disable_push_descriptors = options.disable_push_descriptors || env::Flag("VKFLASH_DISABLE_PUSH_DESCRIPTORS");
  resolved.disable_float16_arithmetic =
      options.disable_float16_arithmetic || env::Flag("VKFLASH_DISABLE_FLOAT16_ARITHMETIC");
  resolved.enable_validation = options.enable_validation || env::Flag("VKFLASH_VALIDATION");
  resolved.pipeline_statistics = options.pipeline_statistics || env::Flag("VKFLASH_PIPELINE_STATISTICS");
  TileOverrides& tiles = resolved.tile_overrides;
  FillText("VKFLASH_COOPMAT_FORWARD_TILE", &tiles.coopmat_forward);
  FillText("VKFLASH_COOPMAT2_FORWARD_TILE", &tiles.coopmat2_forward);
  FillText("VKFLASH_COOPMAT2_DKDV_TILE", &tiles.coopmat2_dkdv);
  FillText("VKFLASH_COOPMAT2_DQ_TILE", &tiles.coopmat2_dq);
  FillText("VKFLASH_DECODE_COOPMAT2_TILE", &tiles.decode_coopmat2);
  FillText("VKFLASH_SCALAR_FORWARD_TILE", &tiles.scalar_forward);
  FillText("VKFLASH_SCALAR_BACKWARD_TILE", &tiles.scalar_backward);
  if (Status s = FillNumber("VKFLASH_DECODE_SPLITS", &tiles.decode_splits); !s.ok()) return s;
  FillText("VKFLASH_NONDETERMINISTIC_DQ", &tiles.nondeterministic_dq);
  if (Status s = FillNumber("VKFLASH_STORED_DS_MAX_MIB", &tiles.stored_ds_max_mib); !s.ok()) return s;
  if (const std::string& dq = tiles.nondeterministic_dq;
      !dq.empty() && dq != "atomic" && dq != "stored-ds" && dq != "recompute") {
    return Status::Error(ErrorCode::kInvalidArgument, "nondeterministic_dq (VKFLASH_NONDETERMINISTIC_DQ) is '" + dq +
                                                          "': expected atomic, stored-ds or recompute");
  }
  return resolved;
}

std::string ResolveDeviceSelector(const std::string& requested) {
  return requested.empty() ? env::Get("VKFLASH_DEVICE").value_or("") : requested;
}

}  // namespace vkflash
