#!/usr/bin/env bash
# 2026-11-28, the register decode kernel's per-score work (issues 21 and 23). Its T lanes per key
# each summed the whole dot products by xor shuffles, so all T ran every score's modifiers, mask
# read and exp2 (B = 1, Hq = 32, Hkv = 8, Nq = 1, 128k keys on an H200: 0.154 ms plain, 0.324 with a
# float32 bias [1, 1, 1, Nk], 0.294 with a softcap). The change sums them by a reduce-scatter, so
# each lane finishes the scores of its own keys, and sends P back by shuffles. build-lab/base: the
# commit before (551a988), build-lab/new: the change.
# First tried on the H100 (not kept; its part is gone, docs/tuning-log.md has the numbers): the
# mask's terms read with the next step's K and V words, slower (128k keys 0.325 -> 0.337 ms).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-decode-scatter.sh bench|goal|sass|tests`.
part=${1:-bench}
RUNS=${RUNS:-50}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

decode_variant_rows() {
  local nk
  issue21_goal_rows
  for nk in 16384 131072; do
    run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd --mask
    run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd --softcap 50
  done
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask --mask-dtype bool
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --alibi
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50 --alibi --sinks --mask
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --read-ceiling
  run --b 4 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 32 --nq 1 --nk 16384 --d 128 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 64 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --mask
}

# Issue 21's goal rows and the variants at 16k keys, for the H100 run.
goal_rows() {
  issue21_goal_rows
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50 --alibi --sinks --mask
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 64 --mode fwd --read-ceiling
}

case "$part" in
  bench)  # run on an H200 (2026-11-28)
    sweep 2 "128" "base new" decode_variant_rows
    ;;
  goal)  # run on the H100
    sweep 2 "128" "base new" goal_rows
    ;;
  sass)  # the decode kernel's machine code of each build
    for v in base new; do sass "$v" --b 1 --h 32 --hkv 8 --nq 1 --nk 4096 --d 128 --mode fwd; done
    ;;
  tests)
    build=build-lab/new
    catch_tests decode '"[decode]"'
    report decode
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
