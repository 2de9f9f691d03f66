#!/usr/bin/env bash
# 2026-11-28 (third session), what a mask still costs the register decode kernel (issue 23), timing
# only. build-lab/new: e280dd5; build-lab/noterms: its mask terms not read (0: every pair open,
# results wrong where the mask blocks), the vote on them kept; build-lab/novote: the terms read but
# no step closed by them (results right, no skipping). Made with tools/lab/build_variant.py from
# shaders/decode/attention_forward_decode.comp:
#   noterms: "? mask_bias_log2(modifiers[r], q_row[r], key)" -> "? 0.0" in mask_terms
#   novote:  both mask_closes_step(...) verdicts -> false
# Second run: build-lab/loadall: every step loaded, the closed ones not computed
# ("if (!next_closed) load_step(" -> "if (true) load_step("); build-lab/computeall: the closed steps
# not loaded but computed ("if (!closed) {  // a step ..." -> "if (MASK_SUMMARY ? !closed : true) {"):
# results right either way (a closed step's pairs are all masked, and P V selects).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-decode-mask-cost.sh`.
RUNS=${RUNS:-50}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

cost_rows() {
  local d
  for d in 64 128; do
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d $d --mode fwd
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d $d --mode fwd --mask
  done
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --mask --mask-dtype f16
  for d in 64 128; do
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d $d --mode fwd --mask --mask-sparsity 0.75
  done
}
sweep 2 "128" "${BUILDS:-new loadall computeall}" cost_rows  # the first run: "new noterms novote"
