#!/usr/bin/env bash
# 2026-11-27, issue 23: the coopmat2 forward and dK/dV kernels find the tiles the mask closes
# along their loop up front, the whole workgroup in parallel, into shared memory
# (common/closed_tiles.glsl), instead of reading the summary at every step (dK/dV) or walking it
# (the forward) (docs/tuning-log.md, "closed tiles found up front"). Carry
# [".gpu", ".gl", "build-lab"], build-lab/ holding:
#   new/vkflash, new/tests/vkflash_tests, new/CMakeCache.txt   this change's build-gpu
#   base/vkflash     the commit before it
# and run `bash tools/lab/runs/2026-11-27-closed-tiles.sh bench|tests`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

if [ "$part" = bench ]; then
  for round in 1 2; do
    for d in 128 64; do
      h=$((2048 / d))
      for v in base new; do
        cli=build-lab/$v/vkflash
        echo "== $v D=$d round $round"
        run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both
        run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask
        run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --mask-dtype f16
        [ $round = 1 ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --mask-sparsity 0.75
        [ $round = 1 ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --causal
      done
    done
  done
fi

if [ "$part" = tests ]; then
  catch_tests mask_backward '"masks: backward and*"' &
  catch_tests mask_tiles '"masks: tiles the mask*","masks: rows the mask*","masks: the bias*"' &
  catch_tests mask_sequences '"masks with sequences*","masks: a padding*","masks: forward matches*"' &
  wait
  report mask_backward mask_tiles mask_sequences
fi
