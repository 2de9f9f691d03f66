#!/usr/bin/env bash
# 2026-11-27, issue 22: the subgroup-scope (KHR / NV cooperative matrix) dK/dV kernel keeps its K
# rows in registers, loaded once through the region that then holds each step's Q and dO, so that
# a tile fits 16 KB of shared memory at head dim 128 (docs/tuning-log.md, "the subgroup-scope dK/dV
# kernel's K rows in registers"). Carry [".gpu", ".gl", "build-lab"], build-lab/ holding:
#   new/vkflash, new/tests/vkflash_tests, new/CMakeCache.txt   this change's build-gpu
#   base/vkflash     the commit before it
# and run `bash tools/lab/runs/2026-11-27-khr-dkdv-k-registers.sh bench|tests`.
part=${1:-bench}
RUNS=${RUNS:-10}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

if [ "$part" = bench ]; then
  for d in 128 64; do
    h=$((2048 / d))
    for limit in full 32768 16384; do
      for v in base new; do
        cli=build-lab/$v/vkflash
        echo "== $v D=$d shared $limit"
        if [ $limit = full ]; then
          run --kernel coopmat_khr --b 4 --h $h --n 4096 --d $d --mode bwd
        else
          VKFLASH_MAX_SHARED_BYTES=$limit run --kernel coopmat_khr --b 4 --h $h --n 4096 --d $d --mode bwd
        fi
      done
    done
  done
  echo "== registers"
  for v in base new; do
    echo "-- $v"
    VKFLASH_PIPELINE_STATISTICS=1 build-lab/$v/vkflash bench --no-naive --runs 2 --warmup 1 --warmup-ms 0 --min-time-ms 0 \
      --kernel coopmat_khr --b 1 --h 16 --n 1024 --d 128 --mode bwd 2>&1 | grep -E "statistics backward_dkdv" | cut -c1-220
  done
fi

if [ "$part" = tests ]; then
  # The family's backward tests; not those that pick the scalar family's tiles or turn subgroup
  # operations off (the subgroup-scope kernels need them), which a forced family cannot run.
  first='"backward matches the float64*"'
  rest='"sliding windows: backward*","softcap: backward*","layouts: *","varlen: *","a row a key cannot*"'
  logs=()
  for k in ${FAMILIES:-coopmat_khr coopmat_nv}; do
    for limit in ${LIMITS:-full 16384}; do
      limit_var=(); [ $limit = full ] || limit_var=(VKFLASH_MAX_SHARED_BYTES=$limit)  # full: the device's
      TEST_TIMEOUT=${TEST_TIMEOUT:-300} catch_tests ${k}_${limit}_a "$first" VKFLASH_KERNELS=$k "${limit_var[@]}" &
      TEST_TIMEOUT=${TEST_TIMEOUT:-300} catch_tests ${k}_${limit}_b "$rest" VKFLASH_KERNELS=$k "${limit_var[@]}" &
      logs+=(${k}_${limit}_a ${k}_${limit}_b)
    done
  done
  wait
  report "${logs[@]}"
fi
