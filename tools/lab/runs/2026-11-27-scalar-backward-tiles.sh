#!/usr/bin/env bash
# 2026-11-27, issue 22: the scalar backward runs at 0.59x the scalar forward at D = 128 (18.0 against
# 30.6 TFLOP/s), 0.6x wanted. Its tile tables (kTiledDkdvTiles, kTiledDqTiles in
# engine/attention/backends/scalar_backend.cc) were measured on 2026-11-24, before the forward's and
# the kernels' later changes: the tiles again, one kernel forced at a time
# (VKFLASH_SCALAR_BACKWARD_TILE=DKDV,DQ, each owned x streamed x threads per row x rows per thread),
# the other at its default, beside the forward of the same run. The bench's kernel column names the
# tiles that ran (a forced tile that does not fit falls back to the table).
# Part `sweep` (the first run, on c5cbaa3's table), then `confirm` on the table that took its best
# dK/dV tile, 32x32x16x4 (16 invocations per row, 4 rows each): its neighbours in two rounds, the
# mobile limits' tiles with 16 invocations per row; `tests`: the [backward] tests with the scalar kernels.
# Carry [".gpu", ".gl", "build-lab"] with build-lab/new;
# `bash tools/lab/runs/2026-11-27-scalar-backward-tiles.sh sweep|confirm|tests`.
part=${1:-sweep}
RUNS=${RUNS:-10}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows
cli=build-lab/new/vkflash
shape=(--kernel scalar --b 4 --h 16 --n 4096 --d 128)
bwd() { echo "== backward tiles '$1' ${2:-}"; env VKFLASH_SCALAR_BACKWARD_TILE="$1" ${2:-} "$cli" bench --no-naive \
  --runs "$RUNS" --min-time-ms 200 "${shape[@]}" --mode bwd 2>&1 | grep -E "^ +[0-9]|error"; }
case "$part" in
  sweep)
    echo "== forward"
    run "${shape[@]}" --mode fwd
    for tiles in "" 32x32x16x4, 32x64x8x2, 64x16x8x4, 32x16x8x1, 16x32x8x2, 32x32x8x1, \
                 ,64x32x8x4 ,64x16x16x8 ,128x16x8x8 ,64x8x8x4 ,32x16x8x2 ,64x16x8x2 ,32x32x8x4; do
      bwd "$tiles"
    done
    echo "== forward"
    run "${shape[@]}" --mode fwd
    ;;
  confirm)
    for round in 1 2; do
      echo "== forward"
      run "${shape[@]}" --mode fwd
      for tiles in "" 32x32x8x2, 32x16x16x4, 64x32x16x8, 32x32x16x2, 64x16x16x8, 16x32x16x2; do bwd "$tiles"; done
    done
    echo "== causal"
    run "${shape[@]}" --mode fwd --causal
    run "${shape[@]}" --mode bwd --causal
    for limit in 32768 16384; do
      echo "== forward VKFLASH_MAX_SHARED_BYTES=$limit"
      VKFLASH_MAX_SHARED_BYTES=$limit run "${shape[@]}" --mode fwd
      for tiles in "" 32x16x16x4, 16x16x16x4, 16x8x16x4, 16x8x8x4, 16x16x16x4,16x16x16x4; do
        bwd "$tiles" VKFLASH_MAX_SHARED_BYTES=$limit
      done
    done
    ;;
  tests)  # the new table's tile under the [backward] tests, the scalar kernels forced (~7 minutes on the H100)
    build=build-lab/new TEST_TIMEOUT=560 catch_tests backward_scalar '"[backward]~[cli]~[knobs]"' VKFLASH_KERNELS=scalar
    report backward_scalar
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
