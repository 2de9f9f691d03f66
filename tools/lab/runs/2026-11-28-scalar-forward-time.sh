#!/usr/bin/env bash
# 2026-11-28 (sixth session), issue 22: where the register-tiled scalar forward's time goes (30.6
# TFLOP/s at D = 128 on the H100; 43 wanted). Timing-only ablations of
# shaders/scalar/attention_forward_tiled.comp by tools/lab/build_variant.py (their O is wrong):
# build-lab/s_nos (S's dot products cut to one element of Q: no K reads, no Q conversions past the
# first), s_nopv (no P V: one P added to O instead), s_noexp (P = S - reference, no exp2).
# build-lab/base: HEAD (9f0c462). Second run (`guard`): what V's float16 guard costs, timing-only:
# build-lab/s_norowguard (no per-row atomicMax of V's largest |value| as V is staged; masked tiles
# would then take float16 partials unguarded), s_noguard (also no per-tile atomicMax).
# Third run (`shuffles`): build-lab/new, each V row's largest |value| found by a butterfly of
# shuffles over the lanes that staged the row and stored once, the tile's by a butterfly over the
# subgroup and one atomic per subgroup (scalar/register_tile.glsl's VKF_GUARD_SHUFFLES), against
# build-lab/base, at the mobile limits too; then the scalar kernels' tests on the GPU.
# Fourth run (`head-tests`): the two tests that failed in the third run with build-lab/new at HEAD
# again (9ab6a94, the shuffles reverted), to tell whether they fail without the change.
# Fifth run (`row-sums`): build-lab/new, the row sums compensated (two_sum per tile and in the
# reduction over a row's invocations; the masks test failed on HEAD with the shared-memory
# reduction), against build-lab/base (HEAD 9ab6a94); then the tests that failed and their neighbours.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-scalar-forward-time.sh first|guard|shuffles|head-tests|row-sums`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, scalar_tests, report, the rows
scalar_forward() { run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; }
case "${1:-first}" in
  first) sweep 1 "128 64" "base s_nos s_nopv s_noexp" scalar_forward ;;
  guard) sweep 2 "128 64" "base s_norowguard s_noguard" scalar_forward ;;
  shuffles)
    limits_forward() {
      scalar_forward "$@"
      echo "-- causal"; run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
      echo "-- 32 KB"; VKFLASH_MAX_SHARED_BYTES=32768 scalar_forward "$@"
      echo "-- 16 KB"; VKFLASH_MAX_SHARED_BYTES=16384 scalar_forward "$@"
      echo "-- no subgroup operations"; VKFLASH_DISABLE_SUBGROUP_OPS=1 scalar_forward "$@"
    }
    sweep 2 "128 64" "base new" limits_forward
    build=build-lab/new
    spec='"[scalar]","[nonfinite]","forward matches the float64*","causal rows*","layouts: *","varlen: *","KV lengths*","sliding windows: forward*","masks: forward*","masks: keys far*","sinks: forward*","softcap: forward*"'
    TEST_TIMEOUT=${TEST_TIMEOUT:-240} scalar_tests "" "$spec"
    ;;
  row-sums)
    sums_forward() {
      scalar_forward "$@"
      echo "-- causal"; run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
      echo "-- no subgroup operations"; VKFLASH_DISABLE_SUBGROUP_OPS=1 scalar_forward "$@"
    }
    sweep 2 "128 64" "base new" sums_forward
    build=build-lab/new
    spec='"masks: keys far*","register-tiled*","causal rows*","sinks: forward*","KV lengths*","forward matches the float64*"'
    TEST_TIMEOUT=110 scalar_tests sums- "$spec"
    ;;
  head-tests)
    build=build-lab/new
    spec='"chunked passes carry*","masks: keys far*"'
    TEST_TIMEOUT=120 catch_tests head-auto-nosubgroup "$spec" VKFLASH_DISABLE_SUBGROUP_OPS=1 &
    TEST_TIMEOUT=120 scalar_tests head- "$spec"
    wait
    report head-auto-nosubgroup
    grep -B3 -A12 "FAILED" "$out"/head-*.log | head -80
    ;;
esac
