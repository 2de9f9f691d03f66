#!/usr/bin/env bash
# Run on the dev machine: puts Debian trixie's Vulkan loader and validation layer (1.4.309, which
# know VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2; bookworm's 1.3.239 rejects their
# feature structs) with trixie's C library into .gpu/trixie/. tools/lab/device_checks.sh then runs
# the test suite under them, through trixie's dynamic loader, on the GPU machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/trixie-packages.sh"
download_trixie_packages "$root/.gpu/trixie" vulkan-validationlayers libvulkan1 libc6 libstdc++6 libgcc-s1
ls "$root/.gpu/trixie"
