#!/usr/bin/env bash
# 2026-11-29, issue 21's goal shape (B = 1, Hq = 32, Hkv = 8, Nq = 1, D = 128) on the H200: the split
# kernel alone reads K and V at 0.78-0.79 of the read probe at 16k keys. Is that its loads in flight
# or its arithmetic between them? docs/tuning-log.md, "the decode kernel's loads against its
# arithmetic". Builds, each a CLI in build-lab/NAME (tools/lab/build_variant.py):
#   cur        the committed code (cef3996 in the logged runs);
#   loadsonly  timing only (O wrong): every step's K and V words XORed into O, no scores, no softmax;
#   keys4      4 keys per step instead of 8 (decode_backend.cc), loads one step ahead as now;
#   ahead2k4   4 keys per step, loads two steps ahead (plain calls only: the mask's verdicts stay
#              one step ahead, so a masked call may be wrong);
#   new        P V without its select per element in steps with no masked pair (not committed),
#              with its test binary in build-lab/new/tests;
#   new_keys4  new with 4 keys per step.
# Parts:
#   bench       the goal rows at 16k, 32k and 128k keys of cur, loadsonly, keys4 and ahead2k4, two
#               rounds; then 16 to 66 parts at 16k for cur and ahead2k4, one round;
#   stats       each build's registers and code size (VKFLASH_PIPELINE_STATISTICS);
#   seen        cur, new and loadsonly over the goal rows, D = 64, B = 4, Nq = 2, a float32 bias and
#               softcap + ALiBi + sinks, two rounds; keys4 and new_keys4 at 33 and 49 parts (three
#               workgroups per SM at their 168 registers), one round; the statistics;
#   seen-tests  the [decode] tests of build-lab/new under trixie's validation layer;
#   splits64    2 to 24 parts at D = 64 (16k, 32k, 128k keys; B = 4) and at 8 packed rows (Nq = 2),
#               cur, two rounds. "default" runs without VKFLASH_DECODE_SPLITS (the logged run
#               passed 0, which the CLI refuses; its defaults were timed in `seen` and `more64`
#               where at all);
#   more64      48, 66 and 99 parts at D = 64 beside the default, cur, two rounds, and the D = 64
#               kernel's registers.
# A count asked for is rounded to whole key tiles per part (33 runs 32 parts at 16k keys).
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
      decode_goal_and_neighbour_rows
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
    decode_goal_statistics cur new new_keys4
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
        echo "== D=64 nk $nk default round $round"
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
    catch_tests seen-decode '"[decode]"'
    report seen-decode
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
