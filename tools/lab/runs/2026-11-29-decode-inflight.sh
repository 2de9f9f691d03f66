#!/usr/bin/env bash
# 2026-11-29, issue 21's goal shape (B = 1, Hq = 32, Hkv = 8, Nq = 1, D = 128) on the H200: the split
# kernel alone reads K and V at 0.78-0.79 of the read probe at 16k keys. Is that its loads in flight
# or its arithmetic between them? Variants beside the committed code (build-lab/cur), each a CLI in
# build-lab/NAME built by tools/lab/build_variant.py:
#   loadsonly  timing only (O wrong): every step's K and V words XORed into O, no scores, no softmax;
#   keys4      4 keys per step instead of 8 (decode_backend.cc), loads one step ahead as now;
#   ahead2k4   4 keys per step, loads two steps ahead (plain calls only: the mask's verdicts stay
#              one step ahead, so a masked call may be wrong).
# Part `seen` (second run): build-lab/new is the change that skips P V's select per element in
# steps without a masked pair (all_seen), with its tests; new_keys4 is it with 4 keys per step, at
# the split count that holds three of its workgroups per SM (49) beside keys4.
# Part `splits64` (third run): the split count at D = 64, whose parts hold 4 steps at 16k keys, and
# at 8 packed rows (B = 1, Nq = 2), committed code (build-lab/cur). "default" runs without
# VKFLASH_DECODE_SPLITS (in the 2026-11-29 run the script passed 0, which the CLI refuses: the
# defaults' numbers come from part `seen`'s cur rows).
# Part `more64` (fourth run): more parts than the default at D = 64 (48, 66, 99), and the driver's
# statistics of the D = 64 kernel (how many workgroups an SM holds).
# Carry [".gpu", ".gl", "build-lab"];
# `bash tools/lab/runs/2026-11-29-decode-inflight.sh bench|stats|seen|seen-tests|splits64|more64`.
part=${1:-bench}
RUNS=${RUNS:-50}
export VKFLASH_BUILD_DIR=build-lab/cur
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, statistics, the rows

builds="cur loadsonly keys4 ahead2k4"
case "$part" in
  bench)
    sweep 2 "128" "$builds" issue21_goal_rows
    for v in cur ahead2k4; do
      cli=build-lab/$v/vkflash
      for splits in 16 24 33 48 66; do
        echo "== $v splits $splits"
        VKFLASH_DECODE_SPLITS=$splits run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --read-ceiling
      done
    done
    ;;
  stats)
    for v in $builds; do
      echo "== $v"
      statistics "$v" decode 128 fwd --b 1 --h 32 --hkv 8 --nq 1 --nk 16384
    done
    ;;
  seen)
    seen_rows() {
      issue21_goal_rows
      run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --read-ceiling
      run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 64 --mode fwd --read-ceiling
      run --b 4 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --read-ceiling
      run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --read-ceiling
      run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask
      run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50 --alibi --sinks
    }
    sweep 2 "128" "cur new loadsonly" seen_rows
    for v in keys4 new_keys4; do
      cli=build-lab/$v/vkflash
      for splits in 33 49; do
        echo "== $v splits $splits"
        VKFLASH_DECODE_SPLITS=$splits issue21_goal_rows
      done
    done
    for v in cur new new_keys4; do
      echo "== $v"
      statistics "$v" decode 128 fwd --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 | grep decode
    done
    ;;
  splits64)
    cli=build-lab/cur/vkflash
    splits_run() {  # splits_run COUNT|default ARGS...: run with that split count
      local splits=$1
      shift
      if [ "$splits" = default ]; then run "$@"; else VKFLASH_DECODE_SPLITS=$splits run "$@"; fi
    }
    for round in 1 2; do
      for nk in 16384 32768 131072; do
        for splits in default 8 12 16 24; do
          echo "== D=64 nk $nk splits $splits round $round"
          splits_run $splits --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 64 --mode fwd --read-ceiling
        done
      done
      for splits in default 16 24; do
        echo "== D=64 B=4 splits $splits round $round"
        splits_run $splits --b 4 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --read-ceiling
      done
      for splits in default 16 24; do
        echo "== D=128 Nq=2 splits $splits round $round"
        splits_run $splits --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --read-ceiling
      done
    done
    ;;
  more64)
    cli=build-lab/cur/vkflash
    for round in 1 2; do
      for nk in 16384 131072; do
        run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 64 --mode fwd --read-ceiling
        for splits in 48 66 99; do
          echo "== D=64 nk $nk splits $splits round $round"
          VKFLASH_DECODE_SPLITS=$splits run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 64 --mode fwd --read-ceiling
        done
      done
    done
    statistics cur decode 64 fwd --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 | grep decode
    ;;
  seen-tests)
    build=build-lab/new
    catch_tests seen-decode "[decode]"
    report seen-decode
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
