#!/usr/bin/env bash
# 2026-11-27, issue 23: with a float32 bias the coopmat2 backward runs at 0.72x (D = 128) and 0.62x
# (D = 64) the plain kernel, 0.9x wanted. The forward took another tile with a mask
# (2026-11-27-masked-tiles.sh); the gradient kernels' tiles (kCoopmat2DkdvTiles, kCoopmat2DqTiles)
# with a bias, one kernel forced at a time (VKFLASH_COOPMAT2_DKDV_TILE / _DQ_TILE =
# OWNEDxSTREAMEDxINVOCATIONS), open and 75% closed, one round.
# Carry [".gpu", ".gl", "build-lab"] with build-lab/new; `bash tools/lab/runs/2026-11-27-masked-backward-tiles.sh`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows
cli=build-lab/new/vkflash
masked() {  # D H VARIABLE TILE
  echo "== D=$1 $3='$4'"
  env "$3=$4" "$cli" bench --no-naive --runs 20 --min-time-ms 200 --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" \
    --mode bwd --mask 2>&1 | grep -E "^ +[0-9]|error"
  env "$3=$4" "$cli" bench --no-naive --runs 20 --min-time-ms 200 --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" \
    --mode bwd --mask --mask-sparsity 0.75 2>&1 | grep -E "^ +[0-9]|error"
}
for d in 128 64; do
  h=$((2048 / d))
  run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode bwd
  masked $d $h VKFLASH_COOPMAT2_DKDV_TILE ""
  for t in 64x32x128 32x32x64 128x32x256 64x64x128 128x48x256 64x128x128 128x64x256; do masked $d $h VKFLASH_COOPMAT2_DKDV_TILE $t; done
  for t in 64x32x128 128x32x128 128x64x128 64x64x128 32x64x64; do masked $d $h VKFLASH_COOPMAT2_DQ_TILE $t; done
done
