#!/usr/bin/env bash
# 2026-11-29 (nineteenth session), issue 22: the scalar gradient kernels with their owned rows
# (dK/dV: K and V; dQ: Q and dO) staged as floats, the _of32 variants, widened once where staged
# instead of by every invocation that reads them at every step. docs/tuning-log.md, "five levers
# for the scalar backward", "The owned rows as floats". One build (build-lab/new: commit 933de30, which adds
# the variants; a2ecb34 reverts them, slower); tiles forced with VKFLASH_SCALAR_BACKWARD_TILE=DKDV,DQ
# (a trailing f: owned floats).
# Parts:
#   bench  the scalar backward at D = 128 and 64 (B = 4, N = 4096, H = 2048 / D), the table's
#          tiles and forced ones, one kernel forced at a time, two rounds; the forward for the ratio.
#   tests  `[backward]`, `[scalar]` and `[nonfinite]` with the scalar family forced, twice: both
#          kernels' tiles forced to 32x16x16x4f, then to 32x16x8x2f (each case takes the forced
#          tile where it fits, else the table's). The logged run set TEST_TIMEOUT=140 (200 unless
#          set); the default kernels' names check fails by design with the floats forced.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-scalar-owned-floats.sh bench|tests`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment (build-lab/new), $out, run, sweep

# backward_rows D H: the table's tiles, then each forced tile list of $DKDV_TILES / $DQ_TILES
# (for D) with the other kernel at its default.
backward_rows() {
  local d=$1 h=$2 tile
  echo "-- forward"
  run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode fwd
  echo "-- table"
  run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode bwd
  for tile in $(tiles_for "$d" dkdv); do
    echo "-- dkdv $tile"
    VKFLASH_SCALAR_BACKWARD_TILE="$tile," run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode bwd
  done
  for tile in $(tiles_for "$d" dq); do
    echo "-- dq $tile"
    VKFLASH_SCALAR_BACKWARD_TILE=",$tile" run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode bwd
  done
}
tiles_for() {
  case "$1-$2" in
    128-dkdv) echo "32x16x16x4 32x16x16x4f 32x16x8x4f 32x16x16x2f 16x32x16x2f 16x32x16x4f 16x32x8x2f" ;;
    128-dq) echo "32x16x16x4 32x16x16x4f 32x16x8x4f 32x16x8x2f 32x16x16x2f 32x16x4x2f" ;;
    64-dkdv) echo "32x32x8x4f 32x32x8x2f 64x16x8x4f 32x16x8x4f" ;;
    64-dq) echo "64x16x8x4f 32x32x8x4f 32x32x8x2f 32x16x8x4f" ;;
  esac
}
case "$part" in
  bench) sweep 2 "128 64" "new" backward_rows ;;
  tests)
    TEST_TIMEOUT=${TEST_TIMEOUT:-200} catch_tests of32-d128 '"[backward],[scalar],[nonfinite]"' VKFLASH_KERNELS=scalar \
      VKFLASH_SCALAR_BACKWARD_TILE=32x16x16x4f,32x16x16x4f
    TEST_TIMEOUT=${TEST_TIMEOUT:-200} catch_tests of32-small '"[backward],[scalar],[nonfinite]"' VKFLASH_KERNELS=scalar \
      VKFLASH_SCALAR_BACKWARD_TILE=32x16x8x2f,32x16x8x2f
    report of32-d128 of32-small
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
