#!/usr/bin/env bash
# 2026-11-29, the coopmat2 forward's Q load. Its machine code (2026-11-29-block-sparse-fixed.sh's
# `sass`) loads Q through the clamped tensor layout as 64 separate 16-bit loads an invocation (D = 64),
# where K and V go in 16-byte words. Two timing builds (tools/lab/build_variant.py on
# coopmat2/attention_forward_coopmat2.comp): `qwhole` loads a Q tile that lies whole below q_len
# through an unclamped layout whose base and stride are masked to multiples of 8 (as the bias tiles
# do, where the driver then issues vector loads); `qstaged` stages Q through the K/V tiles' shared
# memory in 16-byte words (rows past q_len zeroed) and loads the matrix from there, where those
# tiles hold its rows (O_THROUGH_TILES). `bench`: them against HEAD (build-lab/final, 8fd96bb), then `vkflash
# check` with coopmat2 forced on tiles that end past q_len (the same Q: the errors match HEAD's to the digit).
# qwhole's edit: the Q load becomes `if (q_begin + BLOCK_Q <= q_len) { a tensorLayoutNV with
# gl_CooperativeMatrixClampModeUndefinedNV, dimension (q_len, HEAD_DIM), stride
# tensor_row_stride(VKF_TENSOR_Q) & ~7u; coopMatLoadTensorNV(q_tile, q_h, q_base & ~7u, its slice
# (q_begin, BLOCK_Q, 0, HEAD_DIM)) } else { the clamped load as before }`.
# `confirm`: qwhole against HEAD again (the first run's output lost its first half), into
# $out/confirm.log, printed compactly.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-q-load.sh bench|confirm`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 1
  run --kernel coopmat2 --b 4 --h "$2" --n 1024 --d "$1" --mode fwd
}

for part in "$@"; do
  case $part in
    bench)
      sweep 2 "64 128" "final qwhole qstaged" rows
      for v in final qwhole qstaged; do
        for d in 64 128; do
          echo "== check $v D=$d"
          VKFLASH_KERNELS=coopmat2 build-lab/$v/vkflash check --b 2 --hq 4 --hkv 2 --nq 300 --nk 500 --d $d --dtype f16 2>&1 | grep -E "kernel|error|PASS|FAIL"
          VKFLASH_KERNELS=coopmat2 build-lab/$v/vkflash check --b 1 --hq 4 --hkv 1 --nq 700 --nk 700 --d $d --dtype f16 --causal --mask 2>&1 | grep -E "kernel|error|PASS|FAIL"
        done
      done
      ;;
    confirm)
      sweep 2 "64 128" "final qwhole" rows > "$out/confirm.log" 2>&1
      awk '/forward_f16/{print $4, $6, $8, $9, $(NF-4); next}{print}' "$out/confirm.log"
      ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
