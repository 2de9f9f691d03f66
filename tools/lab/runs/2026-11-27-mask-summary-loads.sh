#!/usr/bin/env bash
# 2026-11-27, issue 23's block-sparse goal (75% of the bias's blocks closed >= 3x faster than all
# open; 2.93-2.97x on the H100 so far). The summary pass before the kernels
# (scalar/attention_mask_tiles.comp) read a column's 16 rows one load after the other and stopped
# at the first open element: cheap for an open bias (one load), 16 memory latencies per column for
# a closed block, so the closed case paid most for it. `summary4` reads 4 rows of every column at
# once and stops after the first batch that leaves every column open; `summary16` all 16 rows at
# once (tools/lab/build_variant.py). `new` is the build before (build-lab/new).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-27-mask-summary-loads.sh bench|tests|tests-rest`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75
  if [ "$3" = 1 ]; then run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; fi
}
case "$part" in
  bench)
    sweep 2 "128 64" "new summary4 summary16" rows
    echo "== backward"
    bwd_rows() {
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --mask
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --mask --mask-sparsity 0.75
    }
    sweep 1 "128 64" "new summary4" bwd_rows
    ;;
  tests)  # the first run stopped at its 300-second limit inside "tiles the mask closes are skipped"
    build=build-lab/summary4 TEST_TIMEOUT=300 catch_tests mask_summary '"[mask]~[cli]~[knobs]"'
    report mask_summary
    ;;
  tests-rest)  # the [mask] tests from the skipped tiles on, each alone and all at once (~5 minutes)
    export build=build-lab/summary4 TEST_TIMEOUT=500
    catch_tests skipped '"masks: tiles the mask closes*"' &
    catch_tests past_1024 '"masks: loops of more than 1024*"' &
    catch_tests dbias_bits '"masks: the bias*"' &
    catch_tests rest '"masks: the gradient of a bias*","mask parameters*","masks with sequences*"' &
    # the scalar backward's new dK/dV tile (2026-11-27-scalar-backward-tiles.sh tests stopped here)
    catch_tests dbias_bits_scalar '"masks: the bias*"' VKFLASH_KERNELS=scalar &
    wait
    report skipped past_1024 dbias_bits rest dbias_bits_scalar
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
