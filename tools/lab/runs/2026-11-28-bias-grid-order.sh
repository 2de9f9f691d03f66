#!/usr/bin/env bash
# 2026-11-28 (sixth session), issue 23: a bias broadcast over batch and heads ([1, 1, N, N], float32:
# 64 MB at N = 4096, more than the L2) is read whole once per (batch, head), because the forward's
# grid runs a head's query tiles one after the other. Timing-only variant build-lab/headsfirst (by
# tools/lab/build_variant.py): the forward dispatched as (heads, query tiles, batch) and the
# coopmat2 forward reading its head from x and its query tile from y, so that the workgroups in
# flight share query tiles (their bias rows) across heads. build-lab/base: HEAD (9f0c462).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-bias-grid-order.sh first`.
part=${1:-first}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

bias_rows() {
  echo "-- plain"; run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  echo "-- float32 bias"; run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
  echo "-- float16 bias"; run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-dtype f16
  echo "-- float32 bias, 75% closed"; run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75
  echo "-- causal float32 bias"; run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --causal
}

case "$part" in
  first)
    sweep 2 "128 64" "base headsfirst" bias_rows
    ;;
esac
