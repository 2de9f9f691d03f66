#!/usr/bin/env bash
# Runs on the GPU machine, from the project's root, with what tools/lab/gpu_env.sh lists in .gpu/
# and .gl/, and a build in build-gpu/:
#   device run, carry [".gpu", ".gl", "build-gpu"]: bash tools/lab/device_checks.sh [checks | suite FAMILY]
# `checks` (the default) prints the device, vkflash's choices, CPU-checked forward runs, and the
# tests that start processes; `suite FAMILY` runs the Catch2 suite with the kernels FAMILY names
# (auto, scalar, scalar-nosubgroup, coopmat_khr, coopmat_nv): one suite takes minutes, and a
# device command at most ten.
set -uo pipefail
source tools/lab/gpu_env.sh  # loader, driver, validation layers, $build, trixie_run

if [ "${1:-checks}" = suite ]; then
  # The Catch2 suite (all but the CLI tests, which start bookworm processes) under Debian trixie's
  # loader and validation layer 1.4.309, which know both extensions (.gpu/trixie, from
  # tools/lab/fetch-trixie-layer.sh). auto: the kernels it picks (VK_NV_cooperative_matrix2 on
  # NVIDIA); scalar, with and without subgroup operations: the portable kernels, which take every
  # knob; coopmat_khr and coopmat_nv without the [knobs], [instrument] and [adopt] cases, which ask
  # for what those kernels cannot do (a loop budget, no subgroup operations, instrumented calls, an
  # engine device without cooperative matrices).
  declare -F trixie_run >/dev/null || { echo "no trixie layer in .gpu/trixie" >&2; exit 2; }
  family=${2:-auto} spec="~[cli]"
  case $family in
    auto | scalar) export VKFLASH_KERNELS=$family ;;
    scalar-nosubgroup) export VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 ;;
    coopmat_khr | coopmat_nv) export VKFLASH_KERNELS=$family; spec="~[cli]~[knobs]~[adopt]~[instrument]" ;;
    *) echo "usage: $0 suite auto|scalar|scalar-nosubgroup|coopmat_khr|coopmat_nv" >&2; exit 2 ;;
  esac
  echo "Catch2 suite, trixie validation layer, $family:"
  trixie_run "$build/tests/vkflash_tests" "$spec" | grep -E -A12 "FAILED|passed|failed"
  exit
fi

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
