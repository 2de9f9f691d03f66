// What the tile choosers of several families share: the search through a table of tiles in order
// of preference, and the error when nothing fits.
#pragma once

#include <vkflash/device_info.hpp>

#include <functional>
#include <optional>
#include <span>
#include <string>

namespace vkflash::attention {

// The forced tile (an environment variable's, for tuning) if the device can run it, else the
// table's first that it can.
template <typename Tile, typename Fits>
std::optional<Tile> FirstTileThatFits(const std::optional<Tile>& forced, std::span<const Tile> table, const Fits& fits) {
  if (forced && fits(*forced)) return forced;
  for (const Tile& tile : table) {
    if (fits(tile)) return tile;
  }
  return std::nullopt;
}

inline Status NoTensorCoreTile(const AttentionParams& params) {
  return Status::Error(ErrorCode::kUnsupported,
                       "no tensor-core tile fits head dim " + std::to_string(params.shape.head_dim));
}

// Both gradient kernels' choices from `choose(dkdv)`, or the first error.
inline Result<BackwardKernelChoice> BothBackwardKernels(const std::function<Result<KernelChoice>(bool dkdv)>& choose) {
  auto dkdv = choose(true);
  if (!dkdv.ok()) return dkdv.status();
  auto dq = choose(false);
  if (!dq.ok()) return dq.status();
  return BackwardKernelChoice{*dkdv, *dq};
}

}  // namespace vkflash::attention
