#!/usr/bin/env bash
# 2026-11-27, the contract: the tensor-core forwards (coopmat2, its decode kernel, the KHR and NV
# subgroup-scope kernels) take each tile's P relative to the tile's own largest score
# (softmax_reference in shaders/common/score_mod.glsl; replaced the same day by reference_depth: 2026-11-27-reference-depths.sh) instead of the running max, and join the
# sink only at the row's end (finish_row): a sink-dominated row's P were float16 subnormals (20%
# error in O; docs/tuning-log.md, "float16 P relative to the tile in the tensor-core forwards").
# Carry [".gpu", ".gl", "build-lab"], build-lab/ holding head/vkflash (the commit before), new/ (the
# change: vkflash, new/tests/vkflash_tests, CMakeCache.txt) and, for `tests`,
# noref/tests/vkflash_tests (the change's tests with softmax_reference returning the running max),
# and run `bash tools/lab/runs/2026-11-27-float16-p-reference.sh bench|statistics|tests|tests-review`
# (`statistics`: the KHR and NV forwards' registers, local memory and speed in head, new and two
# timing-only variants of new, for their 5% at D = 128: khrfloor/vkflash, the KHR / NV forward
# started from coopmat2's finite floor, without the per-row select of a row that saw no key;
# khrtilemax/vkflash, softmax_reference returning the tile's max, so no running max is kept (wrong
# for masked rows: plain shapes only). Both from tools/lab/build_variant.py on 318ab8b).
part=${1:-bench}
RUNS=${RUNS:-20}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

case "$part" in
  bench)
    sweep 2 "64 128" "head new" tensor_core_forward_rows
    echo "-- decode"
    sweep 1 "128" "head new" decode_rows
    ;;
  statistics)
    khr_rows() {
      local k
      for k in coopmat_khr coopmat_nv; do
        echo "-- $k"
        run --kernel $k --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
      done
    }
    sweep 2 "128 64" "head new khrfloor khrtilemax" khr_rows
    for v in head new khrfloor khrtilemax; do
      for k in coopmat_khr coopmat_nv; do
        for d in 128 64; do
          echo "== statistics $v $k D=$d"
          VKFLASH_PIPELINE_STATISTICS=1 build-lab/$v/vkflash bench --no-naive --runs 2 --warmup 1 --warmup-ms 0 \
            --min-time-ms 0 --kernel $k --b 1 --h 16 --n 1024 --d $d --mode fwd 2>&1 |
            grep -oE "statistics [a-z0-9_]+|Register Count=[0-9]+|Local Memory Size=[0-9]+" | paste - - -
        done
      done
    done
    ;;
  tests)  # not the CLI's tests: they need the CLI at its build path
    far='"masks: keys far below*","sinks: rows whose*","masks: rows the mask blocks entirely*"'
    for k in auto coopmat_khr coopmat_nv; do
      TEST_TIMEOUT=280 catch_tests "sinks_$k" '"[sinks]~[cli]"' VKFLASH_KERNELS=$k &
      TEST_TIMEOUT=280 catch_tests "far_keys_$k" "$far" VKFLASH_KERNELS=$k &
    done
    TEST_TIMEOUT=280 catch_tests decode '"[decode]~[cli]"' &
    build=build-lab/noref TEST_TIMEOUT=280 catch_tests noref_auto '"masks: keys far below*"' &
    wait
    report sinks_auto sinks_coopmat_khr sinks_coopmat_nv far_keys_auto far_keys_coopmat_khr far_keys_coopmat_nv decode noref_auto
    ;;
  tests-review)  # what the review's commit changed (not yet run on the GPU): its tests, fewer at once
    TEST_TIMEOUT=500 catch_tests sinks_auto '"[sinks]~[cli]"' &
    for k in coopmat_khr coopmat_nv; do
      TEST_TIMEOUT=500 catch_tests "nonfinite_$k" '"[nonfinite]~[cli]~[knobs]","masks: keys far below*"' VKFLASH_KERNELS=$k &
    done
    TEST_TIMEOUT=500 catch_tests far_keys_auto '"masks: keys far below*","decode: split-K parts agree*"' &
    wait
    report sinks_auto nonfinite_coopmat_khr nonfinite_coopmat_nv far_keys_auto
    ;;
esac
