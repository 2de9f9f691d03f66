#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages vkflash needs to build and test, if any are missing.
# Safe to run again: it only calls apt-get when something is not installed.
set -euo pipefail

packages=(
  cmake g++ make                 # build
  pkgconf                        # tests/consumers: a program built with pkg-config's flags
  libvulkan-dev                  # Vulkan headers + loader
  glslang-tools                  # glslangValidator: GLSL -> SPIR-V at build time
  mesa-vulkan-drivers            # lavapipe: a CPU Vulkan device when there is no GPU
  vulkan-validationlayers        # VK_LAYER_KHRONOS_validation, on in every test
  catch2                         # tests (v2, header-only)
  libcli11-dev                   # CLI argument parsing (header-only)
  nlohmann-json3-dev             # JSON output of `vkflash bench` (header-only)
  python3-numpy                  # the CLI cross-check test against independent NumPy code
  libglfw3-dev libimgui-dev      # the tile viewer: window, Dear ImGui (GLFW + Vulkan backends)
  libstb-dev                     # the tile viewer: PNG screenshots (and imgui's font rasterizer)
  xvfb xauth                     # the viewer's tests run it under a virtual X server
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "vkflash: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "vkflash: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
