#!/usr/bin/env bash
# Runs on the GPU machine, from the project's root, after the GPU recipe's prepare.sh filled .gpu/
# (with vulkan-validationlayers added to .gpu/extra), .gl/ holds libglvnd's packages (the NVIDIA
# Vulkan driver fails to create an instance without them: apt-get download libvulkan1 libegl1
# libglvnd0 libopengl0 libgl1 libglx0 libgles2) and a build is in build-gpu/:
# Optional: .gpu/trixie from tools/lab/fetch-trixie-layer.sh (a validation layer that knows the
# newer cooperative-matrix extensions).
#   device run, carry [".gpu", ".gl", "build-gpu"]: bash tools/lab/device_checks.sh
# Prints the device, vkflash's choices, CPU-checked forward runs, and the test suite.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
source .gpu/env.sh  # the Vulkan loader and the NVIDIA driver; unpacks .gpu/extra into /tmp/vkt
# The validation layer from .gpu/extra: point its manifest at the unpacked library (setting
# LD_LIBRARY_PATH to /tmp/vkt instead would put Debian's X11 libraries in front of the driver's).
layer_dir=/tmp/vkt/usr/share/vulkan/explicit_layer.d
sed -i 's#"library_path": "libVkLayer#"library_path": "/tmp/vkt/usr/lib/x86_64-linux-gnu/libVkLayer#' \
  "$layer_dir/VkLayer_khronos_validation.json"
export VK_LAYER_PATH=$layer_dir
build=${VKFLASH_BUILD_DIR:-build-gpu}

vulkaninfo --summary 2>/dev/null | sed -n '/Devices:/,$p' | head -20
"$build/vkflash" info
for args in "--dtype f32" "--dtype f16 --causal" "--d 128 --nq 1000 --nk 1500 --dtype f16" \
            "--d 256 --nq 333 --nk 777 --causal" "--d 80 --hq 16 --hkv 1 --nq 513 --nk 513 --dtype f16 --causal"; do
  echo; "$build/vkflash" check $args
done
# The other tensor-core kernels (KHR: built when a newer glslang was found); no validation here.
echo; VKFLASH_KERNELS=coopmat_khr "$build/vkflash" check --d 128 --nq 1000 --nk 1500 --dtype f16 --causal
echo; VKFLASH_KERNELS=coopmat_nv "$build/vkflash" check --d 128 --nq 1000 --nk 1500 --dtype f16 --causal
echo; VKFLASH_MAX_SHARED_BYTES=16384 VKFLASH_DISABLE_SUBGROUP_OPS=1 "$build/vkflash" check --d 128 --dtype f16 --causal

# CTest files name absolute paths of the machine that built them: give it the same root here.
built_root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
if [ "$built_root" != "$PWD" ]; then mkdir -p "$(dirname "$built_root")" && ln -sfn "$PWD" "$built_root"; fi
# The viewer needs GLFW and its X11 libraries (libglfw3 in .gpu/extra, unpacked to /tmp/vkt).
export LD_LIBRARY_PATH=/tmp/vkt/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The NumPy cross-check with this machine's python3 (its /usr/bin/python3 may lack numpy), with
# the kernels "auto" picks (VK_NV_cooperative_matrix2 on the H100), then the subgroup-scope ones.
python3 tests/cli_numpy_crosscheck.py "$build/vkflash" | tail -1
VKFLASH_KERNELS=coopmat_nv python3 tests/cli_numpy_crosscheck.py "$build/vkflash" | tail -1

# Under Debian bookworm's validation layer (1.3.239), which predates VK_KHR_cooperative_matrix and
# VK_NV_cooperative_matrix2 and rejects their feature structs at vkCreateDevice: the tests that
# start processes (the CLI, the training sample) with the tensor cores on VK_NV_cooperative_matrix,
# and the viewer's headless run (its own device enables no cooperative matrices). The viewer's
# Xvfb tests need an X server, which the GPU machine lacks.
(cd "$build" && VKFLASH_KERNELS=coopmat_nv ctest -j8 --output-on-failure -R "^CLI|training sample" -E NumPy &&
  ctest --output-on-failure -R "headless")

# The Catch2 suite (all but the CLI tests, which start bookworm processes) under Debian trixie's
# loader and validation layer 1.4.309, which know both extensions: the kernels "auto" picks
# (VK_NV_cooperative_matrix2), then VK_KHR_cooperative_matrix's (whose [knobs], [instrument] and
# [adopt] cases ask for what those kernels cannot do: no subgroup operations, an engine device
# without KHR).
# Needs .gpu/trixie from tools/lab/fetch-trixie-layer.sh.
if ls .gpu/trixie/vulkan-validationlayers_*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/trixie-root && for f in .gpu/trixie/*.deb; do dpkg -x "$f" /tmp/trixie-root; done
  trixie_layers=/tmp/trixie-root/usr/share/vulkan/explicit_layer.d
  sed -i 's#"library_path": "libVkLayer#"library_path": "/tmp/trixie-root/usr/lib/x86_64-linux-gnu/libVkLayer#' \
    "$trixie_layers/VkLayer_khronos_validation.json"
  trixie_run() {
    VK_LAYER_PATH=$trixie_layers /tmp/trixie-root/usr/lib64/ld-linux-x86-64.so.2 \
      --library-path /tmp/trixie-root/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu "$@"
  }
  echo "Catch2 suite, trixie validation layer, auto kernels:"
  trixie_run "$build/tests/vkflash_tests" "~[cli]" | grep -E -A12 "FAILED|passed|failed"
  echo "Catch2 suite, trixie validation layer, VKFLASH_KERNELS=coopmat_khr:"
  VKFLASH_KERNELS=coopmat_khr trixie_run "$build/tests/vkflash_tests" "~[cli]~[knobs]~[adopt]~[instrument]" |
    grep -E -A12 "FAILED|passed|failed"
fi
