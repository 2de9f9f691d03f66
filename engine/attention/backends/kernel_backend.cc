#include "attention/backends/kernel_backend.h"

#include <array>

#include "attention/backends/coopmat2_backend.h"
#include "attention/backends/coopmat_backend.h"
#include "attention/backends/decode_backend.h"
#include "attention/backends/scalar_backend.h"

namespace vkflash::attention {

void KernelBackend::SetSpecConstants(const KernelChoice&, const CoopmatLayout&, SpecConstants*) const {}

std::span<const KernelBackend* const> KernelBackends() {
  static const DecodeBackend decode;
  static const Coopmat2Backend coopmat2;
  static const CoopmatBackend coopmat;
  static const ScalarBackend scalar;
  static const std::array<const KernelBackend*, 4> backends = {&decode, &coopmat2, &coopmat, &scalar};
  return backends;
}

Result<const KernelBackend*> BackendOf(const KernelChoice& choice) {
  for (const KernelBackend* backend : KernelBackends()) {
    if (choice.family == backend->name()) return backend;
  }
  return Status::Error(ErrorCode::kUnsupported, "kernel '" + choice.kernel + "' names no kernel family");
}

}  // namespace vkflash::attention
