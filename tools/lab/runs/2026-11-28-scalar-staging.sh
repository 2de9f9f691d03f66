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
# Fourth run (`p4`): build-lab/p4, the forward's P tile as f16vec4 (P V reads a row's 4 keys of a
# step in one load instead of 4), against build-lab/new (0c36999); its O checked by `vkflash check`.
# Fifth run (`tiles`): build-lab/new (0c36999), the forward's and gradient kernels' tiles forced
# again (VKFLASH_SCALAR_FORWARD_TILE, VKFLASH_SCALAR_BACKWARD_TILE), since the staging changed.
# Sixth run (`tiles64`): the D = 64 forward's old (64x32x4x2) and new (64x32x8x4) first tile, forced,
# causal, at 32 and 16 KB, with float32 tensors and without subgroup operations.
# Seventh run (`final`): build-lab/new at 4f78610 (the D <= 64 tile in the table), the scalar
# kernels' numbers and their tests, scalar forced.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-scalar-staging.sh first|pairs|lse|p4|tiles|tiles64|final`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, scalar_tests, report, the rows
scalar_forward() { run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; }
scalar_both() {
  scalar_forward "$@"
  echo "-- causal"; run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
  echo "-- backward"; RUNS=10 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd
}
# The bench rows shortened: ms and TFLOP/s (brief_times), or the fields from FIRST on (brief_kernels FIRST).
brief_times() { awk '/^(==|--)/ {print; next} NF > 5 {print "  " $(NF-4) " ms " $(NF-3)}'; }
brief_kernels() { awk -v first="$1" '/^(==|--)/ {print; next} NF > 5 {line = "  "; for (i = first; i <= NF - 3; ++i) line = line " " $i; print line}'; }
# The test logs' verdicts only.
verdicts() { grep -E "==|passed|failed|FAILED|no test"; }
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
    TEST_TIMEOUT=250 scalar_tests staging- "$spec"
    ;;
  tiles)
    cli=build-lab/new/vkflash
    forward_tile() { echo "-- $1 $2 ${3:-}"; VKFLASH_SCALAR_FORWARD_TILE=$2 VKFLASH_MAX_SHARED_BYTES=${3:-} scalar_forward "$1" $((2048 / $1)); }
    backward_tile() { echo "-- $1 $2"; VKFLASH_SCALAR_BACKWARD_TILE=$2 RUNS=10 run --kernel scalar --b 4 --h $((2048 / $1)) --n 4096 --d "$1" --mode bwd; }
    {
      for t in "" 64x32x4x2 64x16x8x4 32x32x8x2 64x32x8x2 128x32x8x8; do forward_tile 128 "$t"; done
      for t in "" 64x64x8x4 64x32x8x4 64x64x4x2 128x32x4x4 32x32x4x2; do forward_tile 64 "$t"; done
      for t in "" 16x16x4x2 32x8x8x2 16x8x8x2 32x16x8x2; do forward_tile 128 "$t" 16384; done
      for t in "" 32x16x8x2 32x32x4x2 64x16x8x4; do forward_tile 128 "$t" 32768; done
      for t in "" "32x32x8x2," ",32x32x8x2" ",64x16x4x2" "32x16x16x4,"; do backward_tile 128 "$t"; done
      for t in "" "64x32x4x2," ",64x32x4x2" "32x32x8x2,"; do backward_tile 64 "$t"; done
    } 2>&1 | tee "$out/bench.log" | brief_kernels 11
    ;;
  final)
    cli=build-lab/new/vkflash
    build=build-lab/new
    spec='"[scalar],forward matches the float64*,register-tiled*,causal rows*,[nonfinite]"'
    for d in 128 64; do
      RUNS=10 run --kernel scalar --b 4 --h $((2048 / d)) --n 4096 --d $d --mode fwd
      RUNS=5 run --kernel scalar --b 4 --h $((2048 / d)) --n 4096 --d $d --mode bwd
    done 2>&1 | tee "$out/bench.log" | brief_kernels 7
    TEST_TIMEOUT=130 scalar_tests final- "$spec" | verdicts
    ;;
  tiles64)
    cli=build-lab/new/vkflash
    {
      for t in 64x32x4x2 64x32x8x4; do
        echo "-- $t"
        export VKFLASH_SCALAR_FORWARD_TILE=$t
        run --kernel scalar --b 4 --h 32 --n 4096 --d 64 --mode fwd --causal
        VKFLASH_MAX_SHARED_BYTES=32768 run --kernel scalar --b 4 --h 32 --n 4096 --d 64 --mode fwd
        VKFLASH_MAX_SHARED_BYTES=16384 run --kernel scalar --b 4 --h 32 --n 4096 --d 64 --mode fwd
        run --kernel scalar --b 4 --h 32 --n 4096 --d 64 --mode fwd --dtype f32
        VKFLASH_DISABLE_SUBGROUP_OPS=1 run --kernel scalar --b 4 --h 32 --n 4096 --d 64 --mode fwd
      done
    } 2>&1 | tee "$out/bench.log" | brief_kernels 7
    ;;
  p4)
    p4_rows() {
      scalar_forward "$@"
      echo "-- causal"; run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
      echo "-- 16 KB"; VKFLASH_MAX_SHARED_BYTES=16384 scalar_forward "$@"
    }
    sweep 2 "128 64" "new p4" p4_rows | tee "$out/bench.log" | brief_times
    for d in 128 64; do
      for extra in "" "--causal" "--mask --softcap 20"; do
        echo "== p4 check D=$d $extra"
        VKFLASH_KERNELS=scalar build-lab/p4/vkflash check --dtype f16 --d $d --nq 300 --nk 500 $extra 2>&1 | tail -4
      done
    done
    ;;
  lse)
    backward_rows() {
      scalar_forward "$@"
      echo "-- backward"; RUNS=10 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd
      echo "-- causal backward"; RUNS=10 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --causal
    }
    sweep 2 "128 64" "pairs new" backward_rows | tee "$out/bench.log" | brief_times
    sweep 1 "128" "pairs new" limits_forward | tee -a "$out/bench.log" | brief_times
    build=build-lab/new
    spec='"masks: *,[backward][scalar]"'
    TEST_TIMEOUT=300 scalar_tests lse- "$spec" | verdicts
    ;;
  pairs)
    sweep 2 "128 64" "base batch pair prefetch new" scalar_forward | tee "$out/bench.log" | brief_times
    sweep 2 "128 64" "base batch new" scalar_both | tee -a "$out/bench.log" | brief_times
    sweep 1 "128" "base new" limits_forward | tee -a "$out/bench.log" | brief_times
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
    TEST_TIMEOUT=330 scalar_tests pairs- "$spec" | verdicts
    ;;
esac
