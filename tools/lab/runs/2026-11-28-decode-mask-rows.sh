#!/usr/bin/env bash
# 2026-11-28 (third session), the register decode kernel's mask terms per distinct row (issue 23).
# build-lab/new: the change (VKF_SPEC_MASK_TERM_ROWS: a mask broadcast over heads is read for the
# group's query rows only, over rows too for one row) and each part's second step loaded before its
# verdict (tried, not kept); build-lab/terms: the change without that early load (kept); build-lab/base: the same build with the
# shader's TERM_ROWS = BLOCK_Q (every packed row reads its own terms, as at 89129dc), made by
#   python3 tools/lab/build_variant.py base shaders/decode/attention_forward_decode.comp \
#     "layout(constant_id = VKF_SPEC_MASK_TERM_ROWS) const uint TERM_ROWS = VKF_DEFAULT_BLOCK_Q;" "const uint TERM_ROWS = BLOCK_Q;"
# Part `bench`: the decode rows with a mask [1, 1, Nq, Nk] and their plain references; `stats`: the
# driver's statistics of the kernels at 8 packed rows; `tests`: the change's decode and mask tests
# (the closed-steps test has been renamed since that run: "masks: the register decode kernel's ...").
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-decode-mask-rows.sh bench|stats|tests`.
part=${1:-bench}
RUNS=${RUNS:-50}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

mask_rows() {
  local nq dtype
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd
  for dtype in f32 f16 bool; do
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask --mask-dtype $dtype
  done
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50 --alibi --sinks --mask
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 32768 --d 128 --mode fwd
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 32768 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --mask --mask-dtype f16
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd
  for dtype in f32 f16; do
    run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --mask --mask-dtype $dtype
  done
  run --b 4 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd
  run --b 4 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask --mask-sparsity 0.75
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 128 --mode fwd
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 128 --mode fwd --mask --mask-sparsity 0.75
}

case "$part" in
  bench)
    sweep 2 "128" "base terms new" mask_rows
    ;;
  stats)
    for v in base new; do
      echo "== $v"
      VKFLASH_PIPELINE_STATISTICS=1 build-lab/$v/vkflash bench --no-naive --runs 2 --warmup 1 --min-time-ms 0 \
        --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --mask 2>&1 | grep -iE 'decode|register|spill|shared|instruction' | head -20
    done
    ;;
  tests)  # the two sets side by side
    build=build-lab/new
    catch_tests decode '"[decode]"' &
    catch_tests mask '"masks: the decode kernels'"'"' closed steps*","masks with sequences*","masks: a padding mask*","masks: forward matches*"'
    wait
    report decode mask
    ;;
esac
