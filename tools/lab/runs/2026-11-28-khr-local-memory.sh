#!/usr/bin/env bash
# 2026-11-28 (fifth session), issue 22: where the KHR subgroup-scope kernels' local memory comes
# from. The driver's statistics give the KHR forward 384 bytes of local memory at D = 128 with
# registers to spare (docs/tuning-log.md, "the subgroup-scope kernels' accumulators in local
# memory"). Timing-only variants of 842bd77, made by tools/lab/build_variant.py (their output is
# wrong only where the removed code would have run):
#   build-lab/fwd_nofix: the forward's non-finite V fix-up (a run-time key loop inside the
#     unrolled accumulator loops) removed: "if (kv_first < kv_end && nonfinite_v != 0) {" -> "if (false) {"
#   build-lab/fwd_full: coopmat/coopmat_tiles.glsl's partial 16-row loads and stores removed
#     ("if ((row0) + 16 <= (row_end)) {" -> "if (true) {", both macros; every kernel)
#   build-lab/fwd_both: both
#   build-lab/bwd_nofix: the dK/dV kernel's non-finite dO fix-up removed ("  if (nonfinite_do != 0) {" -> "  if (false) {")
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-khr-local-memory.sh stats|bench|sass`.
part=${1:-stats}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows
builds="new fwd_nofix fwd_full fwd_both bwd_nofix"

khr_rows() {
  run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode bwd
}

case "$part" in
  stats)
    for v in $builds; do
      for d in 64 128; do
        echo "== $v D=$d"
        VKFLASH_PIPELINE_STATISTICS=1 build-lab/$v/vkflash bench --no-naive --runs 1 --warmup 1 --min-time-ms 0 \
          --kernel coopmat_khr --b 1 --h 2 --n 1024 --d $d --mode both 2>&1 | grep "pipeline statistics" |
          sed -E 's/vkflash: pipeline statistics //' | cut -c1-400
      done
    done
    ;;
  bench)
    sweep 2 "128 64" "$builds" khr_rows
    ;;
  sass)
    sass new --kernel coopmat_khr --b 1 --h 2 --n 1024 --d 128 --mode fwd
    sass fwd_both --kernel coopmat_khr --b 1 --h 2 --n 1024 --d 128 --mode fwd
    ;;
esac
