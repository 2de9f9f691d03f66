#!/usr/bin/env bash
# 2026-11-27, issue 22: the scalar forward runs at 30.6 TFLOP/s at D = 128 (43 wanted). The
# backward's re-sweep on today's code found a faster tile with 16 invocations per row group
# (2026-11-27-scalar-backward-tiles.sh); the forward's tiles the same way
# (VKFLASH_SCALAR_FORWARD_TILE=ROWSxKEYSxTxR: rows and keys per step, invocations per row group,
# rows per invocation; the bench's kernel column shows the tile that ran: one that does not fit
# falls back to the table). Carry [".gpu", ".gl", "build-lab"] with build-lab/new;
# `bash tools/lab/runs/2026-11-27-scalar-forward-tiles.sh`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows
cli=build-lab/new/vkflash
for tile in "" 64x32x16x8 32x32x16x4 64x64x16x8 64x16x16x8 128x32x16x16 32x64x16x4 64x32x8x2 32x32x8x2; do
  echo "== forward tile '$tile'"
  VKFLASH_SCALAR_FORWARD_TILE=$tile run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode fwd
done
