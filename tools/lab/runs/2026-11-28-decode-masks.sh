#!/usr/bin/env bash
# 2026-11-28, the decode kernels with a mask (issue 23). build-lab/base: 8c924e6 (the kernels as at
# 75c8480). Part `bench`: the tensor-core decode kernel (9 to 64 packed rows) read a float mask
# element by element in its per-element callback; build-lab/new added it as one matrix per tile
# through a [heads, rows, keys] tensor layout (VKF_DEFINE_PACKED_BIAS_TILE in
# coopmat2/bias_tiles.glsl, not kept: slower, docs/tuning-log.md), build-lab/nobias the same without
# the bias's load and add (timing only, wrong results: what the bias costs beyond the block summary
# and its checks). Part `summary`: the register decode kernel (up to 8 packed rows) with the mask's
# summary checks taken out (build-lab/nochecks: no step skipped; the summary still made) and with
# the summary pass too (build-lab/nosummary): what the block summary costs a decode call.
# Part `register`: build-lab/new first the register kernel without the summary, the steps the mask
# closes found from its elements, read two steps ahead (one run: faster at 16k keys, slower at 128k);
# then with that done for parts of at most 32 steps and the summary read beyond (kept_rows as in
# this file; the first run had 16k and 128k keys only, the 16k rows and Nq = 2, B = 4 at 16k keys).
# Part `bound`: the kept bound, 16 steps. `tests` runs the change's decode and mask tests.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-decode-masks.sh bench|summary|register|bound|tests|kept-tests`.
part=${1:-bench}
RUNS=${RUNS:-50}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

# 16 and 64 packed rows (Nq 4 and 16 over 8 KV heads of 4 query heads), 16 packed rows of one query
# row (16 query heads per KV head); 16384 keys (whole 16-byte mask rows: vector loads) and 16383
# (the clamped load); a float16 mask; a batch of 4, causal.
packed_rows() {
  local nq nk
  for nq in 4 16; do
    run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd
    for nk in 16384 16383; do
      run --b 1 --h 32 --hkv 8 --nq $nq --nk $nk --d 128 --mode fwd --mask
    done
    run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd --mask --mask-dtype f16
  done
  run --b 1 --h 32 --hkv 2 --nq 1 --nk 16384 --d 128 --mode fwd
  run --b 1 --h 32 --hkv 2 --nq 1 --nk 16384 --d 128 --mode fwd --mask
  run --b 4 --h 32 --hkv 8 --nq 16 --nk 8192 --d 128 --mode fwd --causal
  run --b 4 --h 32 --hkv 8 --nq 16 --nk 8192 --d 128 --mode fwd --causal --mask
}

register_rows() {
  local nk
  for nk in 16384 131072; do
    run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd
    run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd --mask
  done
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask --mask-dtype f16
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --mask
  run --b 4 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask
}

kept_rows() {
  local nk
  for nk in 16384 32768 65536 131072; do
    run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd
    run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd --mask
    run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd --mask --mask-sparsity 0.75
  done
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask --mask-dtype f16
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask --mask-dtype bool
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50 --alibi --sinks --mask
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --mask
}

case "$part" in
  register)
    sweep 2 "128" "base new" kept_rows
    ;;
  summary)
    sweep 2 "128" "base nochecks nosummary" register_rows
    ;;
  bench)
    sweep 2 "128" "base new nobias" packed_rows
    ;;
  tests)
    build=build-lab/new
    catch_tests decode '"[decode]"'
    catch_tests mask '"masks: a padding mask*","masks with sequences*","masks: tiles the mask closes*"'
    catch_tests mask_forward '"masks: forward matches*","masks: rows the mask blocks*"'
    report decode mask mask_forward
    ;;
  bound)  # the kept bound (16 steps): 32k keys read the mask's terms, 64k the summary
    bound_rows() {
      local nk
      for nk in 32768 65536; do
        run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd --mask
        run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd --mask --mask-sparsity 0.75
      done
    }
    sweep 2 "128" "base new" bound_rows
    ;;
  kept-tests)
    build=build-lab/new
    catch_tests kept '"masks: the decode kernels'"'"' closed steps*","masks: the tensor-core decode*","masks: a padding mask*","decode: every lane layout*","score variants over a KV cache*"'
    report kept
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
