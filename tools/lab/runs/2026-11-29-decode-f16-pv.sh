#!/usr/bin/env bash
# 2026-11-29 (eighteenth session), issue 21: the register decode kernel's arithmetic between its
# loads. docs/tuning-log.md, "the decode kernel's keys in each lane's order, S as fma chains and
# P V in float16". Builds (tools/lab/build_variant.py; build-lab/NAME), each a decode kernel:
#   base   8cd619b's (selects in the reduce-scatter and its gather, S by `+= dot()`, P V float32);
#   part `bench` (first device run):
#   new    each lane's keys in its own order at every level (no selects), S as one fma chain, and
#          P V in float16 over each step (P <= 1/16) where the device has shaderFloat16 (a kernel
#          forward_f16_decode_f16math), with its test binary in build-lab/new/tests;
#   perm   new with VKFLASH_DISABLE_FLOAT16_ARITHMETIC=1: the same kernel with P V in float32, a
#          wrapper script around build-lab/new/vkflash;
#   part `order` (second device run; P V float32 in all):
#   fma    base with S as one fma chain;
#   new    fma with the lane's own key order only at the levels whose lane bit leaves runs of at
#          least 4 lanes of a key per load (the first two at T = 16, the first at T = 8), with its
#          test binary in build-lab/new/tests;
#   full   fma with the lane's own key order at every level.
#   part `d256` (fourth device run, base and new as in `final`): D = 256, where a step has 4 keys
#          from 1 packed row on (2 words a key per lane), 1, 4 and 8 packed rows, two rounds.
#   part `rows` (fifth device run): new is the lane order for 5 to 8 packed rows instead (with the
#          scalar forward's rare guard atomics beside it): the D = 256 rows and the 8-row shapes
#          against base, one round; `rows-tests`: the [decode] tests.
#   part `final` (third device run): new is the kept code (fma everywhere, the lane order where a
#          step has at most 4 keys): one round of the rows against base, the [decode] tests, and
#          the [fuzz] case's large draws with the decode family forced and with auto.
# Parts: the registers of each build's kernel; issue 21's goal rows (16k, 32k, 128k keys), D = 64
# at 16k and 128k, B = 4, 8 packed rows (Nq = 2), softcap + ALiBi + sinks and a float32 mask at
# 16k (`order` adds 8-row shapes), two rounds; then the [decode] tests of build-lab/new (`bench`:
# with float16 arithmetic and without).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-decode-f16-pv.sh PART`.
RUNS=${RUNS:-50}
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment (build-lab/new), $out, run, sweep, the rows

# The goal and neighbour rows, and the score variants and a float32 mask at 16k keys (not
# run_env.sh's decode_rows).
variant_decode_rows() {
  decode_goal_and_neighbour_rows
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50 --alibi --sinks
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask
}
eight_row_shapes() {
  variant_decode_rows
  run --b 1 --h 64 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 131072 --d 128 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 64 --mode fwd --read-ceiling
}
d256_rows() {
  run --b 1 --h 8 --hkv 8 --nq 1 --nk 16384 --d 256 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 256 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 256 --mode fwd --read-ceiling
  run --b 1 --h 64 --hkv 8 --nq 1 --nk 16384 --d 256 --mode fwd --read-ceiling
}
case "$part" in
  bench)
    mkdir -p build-lab/perm
    printf '#!/bin/sh\nVKFLASH_DISABLE_FLOAT16_ARITHMETIC=1 exec "%s" "$@"\n' "$PWD/build-lab/new/vkflash" > build-lab/perm/vkflash
    chmod +x build-lab/perm/vkflash
    decode_goal_statistics base new perm
    sweep 2 "128" "base new perm" variant_decode_rows
    TEST_TIMEOUT=${TEST_TIMEOUT:-240} catch_tests decode-f16 '"[decode]"' &
    TEST_TIMEOUT=${TEST_TIMEOUT:-240} catch_tests decode-f32 '"[decode]"' VKFLASH_DISABLE_FLOAT16_ARITHMETIC=1 &
    wait
    report decode-f16 decode-f32
    ;;
  order)
    decode_goal_statistics base fma new full
    for v in base fma new full; do
      echo "== $v, 8 rows"
      statistics "$v" decode 128 fwd --b 1 --h 64 --hkv 8 --nq 1 --nk 16384 | grep decode
    done
    sweep 2 "128" "base fma new full" eight_row_shapes
    TEST_TIMEOUT=${TEST_TIMEOUT:-240} catch_tests decode-order '"[decode]"'
    report decode-order
    ;;
  d256)
    sweep 2 "256" "base new" d256_rows
    ;;
  rows)
    sweep 1 "256" "base new" d256_rows
    sweep 1 "128" "base new" eight_row_shapes
    ;;
  rows-tests)
    TEST_TIMEOUT=${TEST_TIMEOUT:-240} catch_tests rows-decode '"[decode]"'
    report rows-decode
    ;;
  final)
    sweep 1 "128" "base new" eight_row_shapes
    catch_tests final-decode '"[decode]"' &
    TEST_TIMEOUT=300 catch_tests final-fuzz-decode '"[fuzz]"' VKFLASH_KERNELS=decode VKFLASH_FUZZ_SEED=900000 \
      VKFLASH_FUZZ_CASES=150 VKFLASH_FUZZ_LARGE=1 &
    TEST_TIMEOUT=300 catch_tests final-fuzz-auto '"[fuzz]"' VKFLASH_FUZZ_SEED=910000 VKFLASH_FUZZ_CASES=100 \
      VKFLASH_FUZZ_LARGE=1 &
    wait
    report final-decode final-fuzz-decode final-fuzz-auto
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
