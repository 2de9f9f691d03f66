#!/usr/bin/env bash
# 2026-11-29, issue 23's block-sparse goal at D = 64 (coopmat2 forward, float32 bias [1, 1, N, N],
# B = 4, N = 4096, H = 2048 / D; 75% of the 128 x 128 blocks closed runs 2.98x faster than all open
# on the H200, 3x wanted). Where does the closed case's time beyond its visited tiles go? `sparsity`:
# the forward at 0 to 100% of the blocks closed (a line through the points: a fixed part and a part
# per visited tile), and `nofwd` (tools/lab/build_variant.py: the forward returns at once when a
# mask is given), which times the block summary pass and an empty forward dispatch alone.
# `fixed`: what the forward does when the mask closes every tile, each part left out in turn
# (timing-only builds of coopmat2/attention_forward_coopmat2.comp, wrong results): `noq` Q not
# loaded (a zero matrix), `nofind` no up-front search of the closed tiles (every tile taken as
# closed), `noepi` no epilogue where no tile ran (no O, no LSE stored), `none` all three.
# `search`: the up-front search (common/closed_tiles.glsl) taken apart: `relaxed` its shared-memory
# atomic at workgroup scope (the default is device scope), `noatomic` a plain store instead of the
# atomic (racy: timing only), `noreads` no summary reads (every tile taken as closed); and the
# machine code of HEAD's masked forward at D = 64 (run_env.sh's sass, into $out).
# `skip`: build-lab/skip (the closed tiles skipped in a loop of their own, next_open_tile, instead of
# a `continue` at the top of the step) against HEAD, then its `[forward][mask]` tests (not decode).
# `skip2`: build-lab/skip2 (the same, and in the coopmat2 dK/dV and dQ kernels) against HEAD,
# forward and backward, then its `[backward][mask]` tests (not decode).
# `final`: tests of the kept build (build-lab/final, 8fd96bb: the forward's loop of `skip`, and the
# test of atomic dQ with a block-sparse mask): that test, the `[forward][mask]` cases that are not
# decode or backward, and the forward `[nonfinite]` ones (the `[forward][backward][mask]` cases ran
# on `skip`, whose forward is the same); `atomic`: that test alone, counting its cases that ran
# atomic dQ (its INFO lines, printed with -s).
# Carry [".gpu", ".gl", "build-lab"] with build-lab/new (HEAD, 3388233) and the builds named;
# `bash tools/lab/runs/2026-11-29-block-sparse-fixed.sh sparsity|fixed|search|skip|skip2|final|atomic`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

sparsity_rows() {
  local s
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
  for s in 0.5 0.75 0.875 1; do
    run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity $s
  done
}
summary_rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 1
}

skip_rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  summary_rows "$@"
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75 --causal
}

both_rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode both
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode both --mask
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode both --mask --mask-sparsity 0.75
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode both --mask --mask-sparsity 1
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode both --mask --mask-sparsity 0.75 --causal
}

for part in "$@"; do
  case $part in
    sparsity)
      sweep 2 "64 128" "new" sparsity_rows
      sweep 2 "64 128" "nofwd" summary_rows
      ;;
    fixed) sweep 2 "64 128" "new noq nofind noepi none" summary_rows ;;
    search)
      sweep 2 "64 128" "new relaxed noatomic noreads" summary_rows
      sass new --kernel coopmat2 --mode fwd --d 64 --b 1 --h 2 --n 1024 --mask
      ;;
    skip)
      sweep 2 "64 128" "new skip" skip_rows
      build=build-lab/skip TEST_TIMEOUT=300 catch_tests skip-forward-mask '"[forward][mask]~[decode]"'
      report skip-forward-mask
      ;;
    skip2)
      sweep 2 "64 128" "new skip2" both_rows
      build=build-lab/skip2 TEST_TIMEOUT=330 catch_tests skip2-backward-mask '"[backward][mask]~[decode]"'
      report skip2-backward-mask
      ;;
    final)
      build=build-lab/final TEST_TIMEOUT=300 catch_tests final-tests \
        '"[mask][atomic],[forward][mask]~[decode]~[backward],[nonfinite][forward]~[decode]"'
      report final-tests
      ;;
    atomic)
      env VKFLASH_KERNELS=auto timeout 200 bash -c "trixie_run build-lab/final/tests/vkflash_tests -s '[mask][atomic]'" \
        > "$out/atomic.log" 2>&1
      grep -aoE "(atomic dQ|the deterministic kernels)$" "$out/atomic.log" | sort | uniq -c
      tail -3 "$out/atomic.log"
      ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
