#!/usr/bin/env bash
# 2026-11-27, issue 22: the subgroup-scope (KHR / NV cooperative matrix) kernels' loops over a
# lane's accumulator elements unrolled (`[[unroll]]`), so that no element is indexed at run time:
# one such index puts the whole array of accumulators in local memory (the driver's statistics:
# 448 bytes of local memory in the KHR forward, 82 local stores per key tile in its machine code).
# docs/tuning-log.md, "the subgroup-scope kernels' accumulators in local memory". Carry [".gpu",
# ".gl", "build-lab"], build-lab/ holding base/vkflash (the commit before) and cmunroll/vkflash
# (the change; for `tests`, also new/vkflash, new/tests/vkflash_tests and new/CMakeCache.txt), and run
# `bash tools/lab/runs/2026-11-27-coopmat-element-loops.sh bench|tests`.
part=${1:-bench}
RUNS=${RUNS:-20}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

if [ "$part" = bench ]; then
  for k in coopmat_khr coopmat_nv; do
    for d in 128 64; do
      for mode in fwd bwd; do
        for v in base cmunroll; do
          cli=build-lab/$v/vkflash
          echo "== $k $mode $v D=$d"
          run --kernel $k --b 4 --h $((2048 / d)) --n 4096 --d $d --mode $mode
        done
      done
    done
  done
  for v in base cmunroll; do
    for k in coopmat_khr coopmat_nv; do
      echo "== statistics $v $k"
      VKFLASH_PIPELINE_STATISTICS=1 build-lab/$v/vkflash bench --no-naive --runs 2 --warmup 1 --warmup-ms 0 --min-time-ms 0 \
        --kernel $k --b 1 --h 16 --n 1024 --d 128 --mode both 2>&1 |
        grep -oE "statistics [a-z0-9_]+|Register Count=[0-9]+|Local Memory Size=[0-9]+" | paste - - -
    done
  done
fi

if [ "$part" = tests ]; then
  # Each family forced: the tests whose shapes reach partial 16-row blocks, non-finite V and dO
  # (the unrolled loops), and the references of both passes.
  spec='"forward matches the float64*","forward with a custom*","forward with large*","causal rows*","forward results are bit*","LSE is optional*","layouts: *","varlen: *","KV lengths*","[nonfinite]","backward matches the float64*","sliding windows: forward*","sliding windows: backward*","softcap: *","masks: forward*","masks: backward*","masks: rows the mask*","masks: tiles the mask*"'
  family_tests %s "$spec" coopmat_khr coopmat_nv
fi
