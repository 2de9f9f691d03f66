#!/usr/bin/env bash
# 2026-11-27, issue 23: the coopmat2 forward and dK/dV kernels find the tiles the mask closes
# along their loop up front, the whole workgroup in parallel, into shared memory
# (common/closed_tiles.glsl), instead of reading the summary at every step (dK/dV) or walking it
# (the forward) (docs/tuning-log.md, "closed tiles found up front"). Carry
# [".gpu", ".gl", "build-lab"], build-lab/ holding:
#   new/vkflash, new/tests/vkflash_tests, new/CMakeCache.txt   this change's build-gpu
#   base/vkflash     the commit before it
# and run `bash tools/lab/runs/2026-11-27-closed-tiles.sh bench|tests`.
# Parts dq-bench and dq-tests (not kept): the coopmat2 dQ kernel too finds the key tiles the mask
# closes before its loop instead of walking the summary; there base/ is the commit with the forward
# and dK/dV kernels changed, new/ the dQ kernel's change.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

# mask_rows MODE D H ROUND: plain, float32 and float16 bias; in the first round also 75% of the
# bias's blocks closed, and causal with the bias.
mask_rows() {
  local mode=$1 d=$2 h=$3 round=$4
  run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode $mode
  run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode $mode --mask
  run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode $mode --mask --mask-dtype f16
  [ $round = 1 ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode $mode --mask --mask-sparsity 0.75
  [ $round = 1 ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode $mode --mask --causal
}
both_mask_rows() { mask_rows both "$@"; }
bwd_mask_rows() { mask_rows bwd "$@"; }

case "$part" in
  bench) sweep 2 "128 64" "base new" both_mask_rows ;;
  dq-bench) sweep 2 "128 64" "base new" bwd_mask_rows ;;
  tests)
    catch_tests mask_backward '"masks: backward and*"' &
    catch_tests mask_tiles '"masks: tiles the mask*","masks: rows the mask*","masks: the bias*"' &
    catch_tests mask_sequences '"masks with sequences*","masks: a padding*","masks: forward matches*"' &
    wait
    report mask_backward mask_tiles mask_sequences
    ;;
  dq-tests)
    catch_tests mask_backward '"masks: backward and*"' &
    catch_tests mask_tiles '"masks: tiles the mask*"' &
    catch_tests mask_rest '"masks with sequences*","masks: a padding*","masks: rows the mask*","masks: the bias*"' &
    wait
    report mask_backward mask_tiles mask_rest
    ;;
esac
