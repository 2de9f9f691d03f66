#!/usr/bin/env bash
# 2026-11-27, the contract: the tensor-core forwards measure a tile's P, O and l from m - depth, the
# running max less the whole number of base-2 units by which the tile's largest score lies below it
# (reference_depth in shaders/common/score_mod.glsl), so that while the max stands every rescale of
# O and l is an exact power of two. With the tile's max itself as the reference (b4fa85d), the
# far-keys mask test's second case (tiles 100 below the max) failed on the H100 with auto, KHR and
# NV: its LSE, about 2.6e-5, was off by 4% of itself. docs/tuning-log.md, "whole-number reference
# depths", has the first version (references rounded down to integers: the row's largest key's P
# no longer 1, which failed a one-key-per-row backward) and its timings.
# Carry [".gpu", ".gl", "build-lab"], build-lab/ holding new/ (the commit before: vkflash,
# new/tests/vkflash_tests) and depth/ (the change: vkflash, depth/tests/vkflash_tests,
# CMakeCache.txt), and run `bash tools/lab/runs/2026-11-27-reference-depths.sh bench|tests`.
# `lean`: coopmat2 alone, new, depth and lean/ (depth with the coopmat2 step's guards dropped: its
# running max starts finite), then `tests` on lean (VKFLASH_BUILD_DIR=build-lab/lean). `final`:
# coopmat2, new, lean and final/ (lean's expressions in score_mod.glsl's *_finite helpers, which
# glslang emits as function calls), then the far-keys tests on final. `unverified`: what was
# committed after the last device run (4af15b3: finish_row takes a blind row's sink as its max), on
# the build in build-lab/new (VKFLASH_BUILD_DIR=build-lab/new): its new sink test with each
# tensor-core family, [sinks] with auto.
part=${1:-tests}
RUNS=${RUNS:-20}
VKFLASH_BUILD_DIR=${VKFLASH_BUILD_DIR:-build-lab/depth}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

coopmat2_rows() { run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; }

case "$part" in
  bench)
    sweep 2 "64 128" "new depth" tensor_core_forward_rows
    echo "-- decode"
    sweep 1 "128" "new depth" decode_rows
    ;;
  lean)
    sweep 2 "64 128" "new depth lean" coopmat2_rows
    echo "-- decode (tensor cores)"
    decode_row() { run --b 4 --h 32 --hkv 8 --nq 16 --nk 8192 --d 128 --mode fwd; }
    sweep 1 "128" "new depth lean" decode_row
    ;;
  final)
    sweep 2 "64 128" "new lean final" coopmat2_rows
    far='"masks: keys far below*","sinks: rows whose*","*ALiBi and sinks together with causal masks and windows: backward"'
    build=build-lab/final TEST_TIMEOUT=300 catch_tests far_keys_final "$far"
    report far_keys_final
    ;;
  unverified)
    blind='"sinks: a row that sees no key*"'
    for k in auto coopmat_khr coopmat_nv; do
      TEST_TIMEOUT=300 catch_tests "blind_$k" "$blind" VKFLASH_KERNELS=$k &
    done
    TEST_TIMEOUT=500 catch_tests sinks_auto '"[sinks]~[cli]"' &
    wait
    report blind_auto blind_coopmat_khr blind_coopmat_nv sinks_auto
    ;;
  tests)  # not the CLI's tests: they need the CLI at its build path
    far='"masks: keys far below*","sinks: rows whose*","masks: rows the mask blocks entirely*"'
    combined='"*ALiBi and sinks together with causal masks and windows: backward"'  # a comma would split the spec
    TEST_TIMEOUT=500 catch_tests sinks_auto '"[sinks]~[cli]"' &
    for k in auto coopmat_khr coopmat_nv; do
      TEST_TIMEOUT=500 catch_tests "far_keys_$k" "$far,$combined" VKFLASH_KERNELS=$k &
    done
    for k in coopmat_khr coopmat_nv; do
      TEST_TIMEOUT=500 catch_tests "nonfinite_$k" '"[nonfinite]~[cli]~[knobs]"' VKFLASH_KERNELS=$k &
    done
    TEST_TIMEOUT=500 catch_tests masks_auto '"[forward][mask]~[cli]~[knobs]"' &
    TEST_TIMEOUT=500 catch_tests decode_auto '"[decode]~[cli]"' &
    wait
    report sinks_auto far_keys_auto far_keys_coopmat_khr far_keys_coopmat_nv nonfinite_coopmat_khr nonfinite_coopmat_nv \
      masks_auto decode_auto
    ;;
esac
