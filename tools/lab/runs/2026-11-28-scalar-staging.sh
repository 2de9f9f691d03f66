#!/usr/bin/env bash
# 2026-11-28 (eighth session), issue 22: the register-tiled scalar kernels' staging loops
# (scalar/register_tile.glsl's VKF_STAGE_ROWS) read one global word and store it per trip of a loop
# the driver does not unroll, so each trip waits for its read. build-lab/new (= batch): an
# invocation's first 8 words all read, then all stored. build-lab/base: HEAD (754de71).
# build-lab/prefetch: batch, and the forward reads the next step's K and V words into registers
# right after the barrier that publishes this step's (timing variant: ignores the mask's closed
# tiles). Second run (`pairs`): build-lab/new, K and V (Q and dO in the gradient kernels) staged
# by one pair stager, both tensors' reads in flight together (VKF_DEFINE_PAIR_STAGER), against
# build-lab/batch (the first run's new), build-lab/pair (the forward's pair written by hand),
# build-lab/prefetch and build-lab/base; the timings to $OUT/bench.log, ms and TFLOP/s printed.
# Third run (`lse`): build-lab/new, the dK/dV kernel's rows' LSE and delta read before Q and dO are
# staged, against build-lab/pairs (the second run's new); then the masks' tests, scalar forced.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-scalar-staging.sh first|pairs|lse`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows
scalar_forward() { run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; }
scalar_both() {
  scalar_forward "$@"
  echo "-- causal"; run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
  echo "-- backward"; RUNS=10 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd
}
limits_forward() {
  echo "-- 32 KB"; VKFLASH_MAX_SHARED_BYTES=32768 scalar_forward "$@"
  echo "-- 16 KB"; VKFLASH_MAX_SHARED_BYTES=16384 scalar_forward "$@"
  echo "-- 16 KB backward"; VKFLASH_MAX_SHARED_BYTES=16384 RUNS=5 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd
}
case "${1:-first}" in
  first)
    sweep 1 "128 64" "base batch prefetch" scalar_forward
    sweep 2 "128 64" "base batch" scalar_both
    sweep 1 "128" "base batch" limits_forward
    build=build-lab/new
    spec='"[scalar],[nonfinite],forward matches the float64*,causal rows*,masks: forward*,masks: keys far*,sliding windows: *,softcap: *,sinks: *,varlen: *,KV lengths*,chunked passes*,[backward]"'
    TEST_TIMEOUT=250 catch_tests staging-scalar "$spec" VKFLASH_KERNELS=scalar &
    TEST_TIMEOUT=250 catch_tests staging-scalar-nosubgroup "$spec" VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 &
    wait
    report staging-scalar staging-scalar-nosubgroup
    ;;
  lse)
    brief() { awk '/^(==|--)/ {print; next} NF > 5 {print "  " $(NF-4) " ms " $(NF-3)}'; }
    backward_rows() {
      scalar_forward "$@"
      echo "-- backward"; RUNS=10 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd
      echo "-- causal backward"; RUNS=10 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --causal
    }
    sweep 2 "128 64" "pairs new" backward_rows | tee "$out/bench.log" | brief
    sweep 1 "128" "pairs new" limits_forward | tee -a "$out/bench.log" | brief
    build=build-lab/new
    spec='"masks: *,[backward][scalar]"'
    TEST_TIMEOUT=300 catch_tests lse-scalar "$spec" VKFLASH_KERNELS=scalar &
    TEST_TIMEOUT=300 catch_tests lse-scalar-nosubgroup "$spec" VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 &
    wait
    report lse-scalar lse-scalar-nosubgroup | grep -E "==|passed|failed|FAILED|no test"
    ;;
  pairs)
    brief() { awk '/^(==|--)/ {print; next} NF > 5 {print "  " $(NF-4) " ms " $(NF-3)}'; }
    sweep 2 "128 64" "base batch pair prefetch new" scalar_forward | tee "$out/bench.log" | brief
    sweep 2 "128 64" "base batch new" scalar_both | tee -a "$out/bench.log" | brief
    sweep 1 "128" "base new" limits_forward | tee -a "$out/bench.log" | brief
    for v in base new; do
      echo "== statistics $v"
      for mode in fwd bwd; do
        VKFLASH_PIPELINE_STATISTICS=1 "build-lab/$v/vkflash" bench --no-naive --runs 1 --warmup 1 --min-time-ms 0 \
          --kernel scalar --b 1 --h 2 --n 1024 --d 128 --mode $mode 2>&1 | grep -oE "(forward|backward_d\w+)_tiled\w* \[.*" |
          sed -E 's/ \[[0-9,]+\]//; s/Stack Size=[0-9]+ //'
      done
    done
    build=build-lab/new
    spec='"[scalar],[nonfinite],forward matches the float64*,causal rows*,masks: forward*,masks: backward*,sliding windows: *,softcap: *,sinks: *,varlen: *,KV lengths*,chunked passes*,[backward]"'
    TEST_TIMEOUT=330 catch_tests pairs-scalar "$spec" VKFLASH_KERNELS=scalar &
    TEST_TIMEOUT=330 catch_tests pairs-scalar-nosubgroup "$spec" VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 &
    wait
    report pairs-scalar pairs-scalar-nosubgroup | grep -E "==|passed|failed|FAILED|no test"
    ;;
esac
