#!/usr/bin/env bash
# The main job, from a fresh clone: installs missing packages, builds, then runs attention on the
# default Vulkan device (lavapipe when there is no GPU; VKFLASH_DEVICE picks another) and checks
# it against the float64 CPU reference, printing the error and the time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
vkflash=${VKFLASH_BUILD_DIR:-build}/vkflash

"$vkflash" info
echo
# GQA, Nq != Nk, both dtypes, causal and not.
"$vkflash" check --b 2 --hq 8 --hkv 2 --nq 256 --nk 384 --d 64 --dtype f32
echo
"$vkflash" check --b 2 --hq 8 --hkv 2 --nq 256 --nk 384 --d 64 --dtype f16 --causal
echo
"$vkflash" check --b 1 --hq 4 --hkv 4 --nq 100 --nk 100 --d 128 --dtype f16
