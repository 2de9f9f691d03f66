#!/usr/bin/env bash
# 2026-11-27, issue 21's goal shape (B = 1, Hq = 32, Hkv = 8, Nq = 1, D = 128): at 16k keys the
# decode call reads K and V at 0.70-0.72 of the read probe, 0.8 wanted. Where do its last microseconds
# go? Timing-only variants beside the committed code (build-lab/new), each a CLI in build-lab/NAME
# built by tools/lab/build_variant.py: `nocombine` records no merge dispatch (and no barrier before
# it; its O is wrong), `onebarrier` merges the key groups' O with one barrier instead of one per
# group (racy, wrong O). Then the split count (VKFLASH_DECODE_SPLITS) around the default (33).
# `zero`: what a merge fused into the split kernel's last workgroup would pay first, its counters
# zeroed before the split kernel: nocombine with a vkCmdFillBuffer of 256 workspace bytes and its
# two barriers before it (`zero_fill`), or a one-workgroup dispatch and a barrier (`zero_dispatch`).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-27-decode-tail.sh bench|zero`.
part=${1:-bench}
RUNS=${RUNS:-50}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

case "$part" in
  bench)
    sweep 2 "128" "new nocombine onebarrier" issue21_goal_rows
    cli=build-lab/new/vkflash
    for splits in 16 24 33 48 64; do
      echo "== splits $splits"
      VKFLASH_DECODE_SPLITS=$splits run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --read-ceiling
    done
    ;;
  zero)
    sweep 2 "128" "new nocombine zero_fill zero_dispatch" issue21_goal_rows
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
