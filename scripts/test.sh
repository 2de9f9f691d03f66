#!/usr/bin/env bash
# The test suite, from a fresh clone: installs missing packages, builds, runs every test with
# CTest (Catch2 tests with the Vulkan validation layer and synchronization validation on).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd "${VKFLASH_BUILD_DIR:-build}"
ctest -j"$(nproc)" --output-on-failure
