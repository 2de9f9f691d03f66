#!/usr/bin/env bash
# 2026-11-27, code (not kept): the two-tensor staging macro (VKF_DEFINE_STAGE_ROW_PAIR_SPLIT_AT in
# shaders/common/stage_rows.glsl) rebuilt on the one-tensor one (its load and store functions two
# VKF_DEFINE_STAGE_ROWS_SPLIT_AT definitions, load_fn##_a and load_fn##_b, called one after the
# other), so that both tensors' loads are issued as two unrolled loops instead of one. Every
# tensor-core kernel stages through it: timed against cb2b5a6 (build-lab/base) in one run
# (docs/tuning-log.md, "the staging macros"). Carry [".gpu", ".gl", "build-lab"], build-lab/new
# holding that build; run `bash tools/lab/runs/2026-11-27-stage-rows.sh`.
part=${1:-bench}
RUNS=${RUNS:-20}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

if [ "$part" = bench ]; then
  for round in 1 2; do
    for d in 128 64; do
      for args in "--kernel coopmat2 --mode fwd" "--kernel coopmat2 --mode bwd" "--kernel coopmat_khr --mode fwd" \
                  "--kernel coopmat_khr --mode bwd"; do
        for v in base new; do
          cli=build-lab/$v/vkflash
          echo "== round $round D=$d $args $v"
          run $args --b 4 --h $((2048 / d)) --n 4096 --d $d
        done
      done
    done
    for v in base new; do
      cli=build-lab/$v/vkflash
      echo "== round $round decode (tensor cores) Nq=16 $v"
      run --b 4 --h 32 --hkv 8 --nq 16 --nk 8192 --d 128 --mode fwd
      echo "== round $round stored dS $v"
      run --kernel coopmat2 --b 4 --h 16 --n 4096 --d 128 --mode bwd --nondeterministic
    done
  done
fi

