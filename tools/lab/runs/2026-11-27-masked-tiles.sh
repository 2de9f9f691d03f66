#!/usr/bin/env bash
# 2026-11-27, issue 23: with a float bias the coopmat2 forward runs at 0.65-0.74x the plain kernel
# (0.9x wanted), and with 75% of the bias's blocks closed 2.85x faster than open at D = 64 (3x
# wanted). The forward's tile table (kCoopmat2ForwardTiles) was measured without a mask: the tiles
# again with one (VKFLASH_COOPMAT2_FORWARD_TILE=OWNEDxSTREAMEDxINVOCATIONS), open and 75% closed,
# beside the plain kernel at its default. Part `sweep` (the first run); `confirm`, on the table
# where calls with a mask skip 128x64x256 at D = 128 (and so take 64x64x128): each kind of mask
# against 128x64x256 forced, two rounds, a longer row, then the [forward][mask] tests.
# Carry [".gpu", ".gl", "build-lab"] with build-lab/new;
# `bash tools/lab/runs/2026-11-27-masked-tiles.sh sweep|confirm`.
part=${1:-sweep}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows
cli=build-lab/new/vkflash
masked() {  # D H [tile]
  echo "== D=$1 tile '${3:-default}'"
  VKFLASH_COOPMAT2_FORWARD_TILE=${3:-} run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
  VKFLASH_COOPMAT2_FORWARD_TILE=${3:-} run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75
}
case "$part" in
  sweep)
    run --kernel coopmat2 --b 4 --h 32 --n 4096 --d 64 --mode fwd
    for tile in "" 128x64x256 64x64x128 128x32x128 64x128x128 128x128x256 64x96x128 64x32x128; do masked 64 32 "$tile"; done
    run --kernel coopmat2 --b 4 --h 16 --n 4096 --d 128 --mode fwd
    for tile in "" 64x64x128 64x80x128 128x32x256 64x32x128 128x64x128; do masked 128 16 "$tile"; done
    ;;
  confirm)
    f=(--kernel coopmat2 --mode fwd --d 128)
    for round in 1 2; do
      for tile in "" 128x64x256 64x64x128; do
        echo "== round $round tile '${tile:-default}'"
        for args in "" "--mask" "--mask --mask-dtype f16" "--mask --mask-dtype bool" "--mask --causal" \
                    "--mask --mask-sparsity 0.75"; do
          VKFLASH_COOPMAT2_FORWARD_TILE=$tile run "${f[@]}" --b 4 --h 16 --n 4096 $args
        done
        VKFLASH_COOPMAT2_FORWARD_TILE=$tile run "${f[@]}" --b 1 --h 16 --n 8192 --mask
        VKFLASH_COOPMAT2_FORWARD_TILE=$tile run "${f[@]}" --b 1 --h 16 --n 8192 --mask --mask-sparsity 0.75
      done
    done
    build=build-lab/new TEST_TIMEOUT=400 catch_tests forward_mask '"[forward][mask]~[cli]~[knobs]"'
    report forward_mask
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
