#!/usr/bin/env bash
# 2026-11-28, the tensor-core decode kernel (9 to 64 packed rows) with score variants (issue 23):
# its per-element callbacks found each element's head and query row (two integer divisions by
# q_len) and its ScoreHead (with ALiBi a slope's load). The change finds them once per packed row,
# into shared memory, before the loop. build-lab/base: 8c924e6, build-lab/new: the change (not kept:
# no faster, docs/tuning-log.md; the change was two shared arrays filled beside Q's load and read by
# mask_packed and modify_packed, with Coopmat2DecodeBytes counting their 3 words per row).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-decode-packed-modifiers.sh bench|tests`.
part=${1:-bench}
RUNS=${RUNS:-50}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

packed_rows() {
  local nq
  for nq in 4 16; do
    run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd --read-ceiling
    run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd --mask
    run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd --softcap 50
    run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd --alibi
    run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd --softcap 50 --alibi --sinks --mask
  done
  run --b 4 --h 32 --hkv 8 --nq 16 --nk 8192 --d 128 --mode fwd --causal --mask
}

case "$part" in
  bench)
    sweep 2 "128" "base new" packed_rows
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
