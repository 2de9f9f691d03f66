#!/usr/bin/env bash
# 2026-11-29 (fourteenth session), after 2026-11-29-q128.sh: more coopmat2 tiles with score variants
# (docs/tuning-log.md, "the coopmat2 tiles with a softcap or ALiBi"), with the committed build in
# build-lab/new2 (2fb7753), one round. `bwd`: the D = 64 gradient tiles with a softcap of 50 (the
# committed 64x64x128 pair against 32-key steps), and the D = 128 ones with ALiBi and with softcap +
# ALiBi + sinks (VKFLASH_COOPMAT2_DKDV_TILE / _DQ_TILE, owned x streamed x invocations). `fwd`: the
# D = 64 forward's tiles with ALiBi (VKFLASH_COOPMAT2_FORWARD_TILE). `check`: `vkflash check` with
# rows long enough (4608 keys) for the 128x64x256 forward tile, which the score variants now leave.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-variant-tiles.sh bwd fwd`, then
# `bash tools/lab/runs/2026-11-29-variant-tiles.sh check`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run
cli=build-lab/new2/vkflash

tiles_bwd() {  # D DKDV_TILES DQ_TILES ARGS...
  local d=$1 dkdvs=$2 dqs=$3 dkdv dq
  shift 3
  for dkdv in $dkdvs; do
    for dq in $dqs; do
      echo "== D=$d dkdv $dkdv dq $dq $*"
      VKFLASH_COOPMAT2_DKDV_TILE=$dkdv VKFLASH_COOPMAT2_DQ_TILE=$dq \
        run --kernel coopmat2 --b 4 --h $((2048 / d)) --n 4096 --d "$d" --mode bwd "$@"
    done
  done
}

for part in "$@"; do
  case $part in
    bwd)
      {
        tiles_bwd 64 "64x64x128 64x32x128" "64x64x128 64x32x128" --softcap 50
        tiles_bwd 128 "64x48x128 64x32x128" "64x64x128 64x32x128" --alibi
        tiles_bwd 128 "64x48x128 64x32x128" "64x64x128 64x32x128" --softcap 50 --alibi --sinks
      } > "$out/bwd.log" 2>&1
      awk '/_f16/{print $(NF-4), $(NF-3); next}{print}' "$out/bwd.log"
      ;;
    fwd)
      for tile in 128x64x128 64x64x128 64x128x128 128x128x256; do
        echo "== D=64 alibi tile $tile"
        VKFLASH_COOPMAT2_FORWARD_TILE=$tile run --kernel coopmat2 --b 4 --h 32 --n 4096 --d 64 --mode fwd --alibi
      done > "$out/fwd.log" 2>&1
      awk '/_f16/{print $(NF-4), $(NF-3); next}{print}' "$out/fwd.log"
      ;;
    check)
      for extra in "" "--softcap 30" "--alibi" "--softcap 30 --alibi --sinks"; do
        echo "== $extra"
        timeout 100 "$cli" check --b 1 --hq 2 --hkv 1 --nq 4608 --nk 4608 --d 128 --dtype f16 --repeats 1 $extra 2>&1 |
          grep -E "kernel|error|PASS|FAIL"
      done
      ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
