#!/usr/bin/env bash
# 2026-11-27, issue 22: the scalar forward after a fuzz's float16 fixes (16 keys per float16
# partial of P V again, each tile's P relative to the row's largest score in the tile, P for the
# row sums from the stored P), timed against dfe9289 (32-key partials, the numbers measured
# before), and the tests the fuzz added run on the GPU with each kernel family
# (docs/tuning-log.md, "a fuzz of the scalar forward's float16 products"). Carry [".gpu", ".gl",
# "build-lab"], build-lab/ holding p32/vkflash (dfe9289) and new/ (the change: vkflash,
# new/tests/vkflash_tests, CMakeCache.txt), and run
# `bash tools/lab/runs/2026-11-27-float16-partials-revert.sh bench|tests`.
part=${1:-bench}
RUNS=${RUNS:-20}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

fwd_row() { run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; }
bwd_row() { RUNS=10 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd; }
causal_row() { run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal; }

case "$part" in
  bench)
    sweep 2 "128 64" "p32 new" fwd_row
    echo "-- backward"
    sweep 1 "128 64" "p32 new" bwd_row
    echo "-- causal"
    sweep 1 "128" "p32 new" causal_row
    for limit in 32768 16384; do
      echo "-- shared $limit"
      VKFLASH_MAX_SHARED_BYTES=$limit sweep 1 "128" "p32 new" fwd_row
    done
    ;;
  tests)  # not the CLI's tests: they need the CLI at its build path
    sinks='"[sinks]~[cli]"'
    for k in auto coopmat_khr coopmat_nv scalar; do
      TEST_TIMEOUT=300 catch_tests "sinks_$k" "$sinks" VKFLASH_KERNELS=$k &
    done
    TEST_TIMEOUT=300 catch_tests register_tiled '"register-tiled scalar forward*"' &
    wait
    report sinks_auto sinks_coopmat_khr sinks_coopmat_nv sinks_scalar register_tiled
    ;;
esac
