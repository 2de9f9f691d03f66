#!/usr/bin/env bash
# 2026-11-29 (nineteenth session), issue 22: the scalar gradient kernels' tiles at D = 128 on the
# H200 (the table's order came from the H100). docs/tuning-log.md, "five levers for the scalar
# backward", "The tiles on the H200". One build, build-lab/new (a71b72e's kernels, f21a758's).
# Parts:
#   bench  float16, B = 4, H = 16, N = 4096, D = 128, 48 KB: the forward once; each candidate tile
#          of one kernel forced (VKFLASH_SCALAR_BACKWARD_TILE=DKDV,DQ; the lists start with the
#          table's), the other at the table's, two rounds; then the backward with the table's tiles
#          and with each kernel's fastest forced tile (of both rounds' sums), plain and causal; then
#          `[backward]` and `[scalar]` with the scalar family forced at those fastest tiles.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-scalar-backward-tiles-h200.sh bench`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment (build-lab/new), $out, run, sweep
cli=build-lab/new/vkflash
dkdv_tiles="32x32x16x4 32x32x16x2 32x32x8x4 32x32x8x2 32x32x4x2 32x32x16x8 64x8x8x4 32x16x8x2"
dq_tiles="64x16x8x4 64x16x16x4 64x16x8x2 64x16x4x2 64x8x8x4 64x8x4x2 32x32x8x2 32x32x16x4 64x16x8x8"
declare -A total
# ms KIND TILE: the backward's time with that kernel's tile forced, added to total[KIND TILE].
ms() {
  local tiles line t
  [ "$1" = dkdv ] && tiles="$2," || tiles=",$2"
  line=$(VKFLASH_SCALAR_BACKWARD_TILE=$tiles run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode bwd)
  echo "-- $1 $2"
  echo "$line"
  t=$(echo "$line" | awk '{for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9]+\.[0-9]+$/) {print $i; exit}}')
  total["$1 $2"]=$(python3 -c "print(${total["$1 $2"]:-0} + ${t:-1e9})")
}
case "$part" in
  bench)
    run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode fwd
    for round in 1 2; do
      echo "== round $round"
      for t in $dkdv_tiles; do ms dkdv "$t"; done
      for t in $dq_tiles; do ms dq "$t"; done
    done
    best() { for t in $2; do echo "${total["$1 $t"]} $t"; done | sort -g | head -1 | cut -d' ' -f2; }
    best_dkdv=$(best dkdv "$dkdv_tiles") best_dq=$(best dq "$dq_tiles")
    echo "== fastest: dkdv $best_dkdv, dq $best_dq"
    run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode bwd
    VKFLASH_SCALAR_BACKWARD_TILE="$best_dkdv,$best_dq" run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode bwd
    VKFLASH_SCALAR_BACKWARD_TILE="$best_dkdv,$best_dq" run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode bwd --causal
    run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode bwd --causal
    TEST_TIMEOUT=${TEST_TIMEOUT:-200} catch_tests tiles-scalar '"[backward],[scalar]"' VKFLASH_KERNELS=scalar \
      VKFLASH_SCALAR_BACKWARD_TILE="$best_dkdv,$best_dq"
    report tiles-scalar
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
