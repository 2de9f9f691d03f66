#!/usr/bin/env bash
# 2026-11-27, issue 23: the kernels ask the mask's summary about a tile through
# mask_open_key_blocks (shaders/common/score_mod.glsl), which read one row block's word per loop
# iteration, each OR waiting for its load: 8 dependent reads per tile for a 128-row tile, at the
# start of every coopmat2 forward workgroup (common/closed_tiles.glsl) and in the walks of the other
# kernels. `rows4` reads four row blocks' words at once. Against build-lab/new (the commit before).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-27-summary-reads.sh bench|tests`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

fwd_rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75
}
bwd_rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --mask
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --mask --mask-sparsity 0.75
  run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d "$1" --mode fwd --mask
}
case "$part" in
  bench)
    sweep 2 "128 64" "new rows4" fwd_rows
    sweep 1 "128 64" "new rows4" bwd_rows
    ;;
  tests)
    export build=build-lab/rows4 TEST_TIMEOUT=420
    catch_tests fwd_match '"masks: forward matches*","masks: rows the mask blocks*","masks: keys far below*"' &
    catch_tests skipped '"masks: tiles the mask closes*"' &
    catch_tests others '"masks: loops of more than 1024*","masks: a padding mask*","masks with sequences*"' &
    catch_tests skipped_khr '"masks: tiles the mask closes*"' VKFLASH_KERNELS=coopmat_khr &
    wait
    report fwd_match skipped others skipped_khr
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
