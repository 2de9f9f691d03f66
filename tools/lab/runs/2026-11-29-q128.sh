#!/usr/bin/env bash
# 2026-11-29 (fourteenth session): docs/tuning-log.md, "the coopmat2 forward's Q in vector loads at
# D = 128, and where its bias's time goes" and "the coopmat2 tiles with a softcap or ALiBi". Builds
# in build-lab/:
#   final      HEAD's kernels (8682d67) (a build; also the name of a part below);
#   q128       Q tiles wholly below q_len loaded unclamped (Q_IN_WORDS, now Q_WHOLE_TILES_UNCLAMPED)
#              from D = 128 on (the kept code takes it at D = 128 only);
#   biasl1     timing only (tools/lab/build_variant.py on q128): each step's float32 bias tile read
#              from keys [0, BLOCK_KV) of its rows, so that its reads hit the L1 after the first;
#   biasnone   timing only: a constant added instead of the bias tile;
#   biasstaged timing only: the float32 bias tile read in 16-byte words along its rows and staged
#              through shared memory (K's region after S at D >= 128, a region of its own below,
#              where the 64x64x128 tile is forced);
#   new        the kept shader (q128 at D = 128 only), and calls that modify scores per element
#              (softcap, ALiBi) off the 128x64x256 forward tile;
#   new2       new, and with a softcap at D = 64 dQ on 16-row subgroups and dK/dV on 64-query steps
#              (the code of 2fb7753).
# Parts (each its own device run, in this order): `bench tiles bias tests` (q128 against final, the
# forward's tiles with a softcap, the bias diagnostics, q128's GPU tests); `staged modtiles`
# (biasstaged, and 128x64x256 against 64x64x128 at D = 128 with each score modifier); `table
# bwdtiles` (issue 23's variants against plain with new, forward and backward; the gradient tiles
# with a softcap); `bwdtiles2` (D = 64 gradient tiles for each variant); `final` (new2 against new,
# and new2's score-variant tests); `combined` (new2's tests of softcap, ALiBi and sinks together:
# names with a comma, matched from after it, which `final`'s specs missed).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-q128.sh PART...`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --softcap 50
  run --kernel coopmat2 --b 4 --h "$2" --n 1024 --d "$1" --mode fwd
}
bias_rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
}
compact() { awk '/forward_f16/{print $4, $6, $8, $9, $(NF-4); next}{print}' "$1"; }

for part in "$@"; do
  case $part in
    bench)
      sweep 2 "64 128 256" "final q128" rows > "$out/bench.log" 2>&1
      compact "$out/bench.log"
      ;;
    tiles)
      for d in 64 128; do
        for tile in 128x64x128 64x64x128 64x128x128 128x32x128 128x128x256 128x64x256; do
          echo "== softcap D=$d tile $tile"
          cli=build-lab/q128/vkflash
          VKFLASH_COOPMAT2_FORWARD_TILE=$tile run --kernel coopmat2 --b 4 --h $((2048 / d)) --n 4096 --d $d --mode fwd --softcap 50
        done
      done > "$out/tiles.log" 2>&1
      compact "$out/tiles.log"
      ;;
    bias)
      sweep 2 "64 128" "q128 biasl1 biasnone" bias_rows > "$out/bias.log" 2>&1
      compact "$out/bias.log"
      ;;
    tests)
      build=build-lab/q128
      catch_tests fwd '"forward matches the float64 reference on device limits","forward results are bit-identical run after run","LSE is optional*","causal rows that see no key*","forward with large logits*"' &
      catch_tests layouts '"layouts: *"' &
      catch_tests varlen '"varlen forward equals separate calls per sequence*","KV lengths per sequence*"' &
      catch_tests masks '"masks: forward matches the float64 reference*","masks: keys far below*","masks: tiles the mask closes are skipped*"' &
      catch_tests nonfinite '[forward][nonfinite]' &
      catch_tests variants '"softcap: forward matches*","ALiBi: forward matches*","sinks: forward matches*","sliding windows: forward matches*"' &
      wait
      report fwd layouts varlen masks nonfinite variants
      ;;
    staged)
      for round in 1 2; do
        for v in q128 biasstaged; do
          cli=build-lab/$v/vkflash
          echo "== $v D=128 round $round"
          for extra in "" "--causal" "--mask-sparsity 0.75"; do
            run --kernel coopmat2 --b 4 --h 16 --n 4096 --d 128 --mode fwd --mask $extra
          done
          echo "== $v D=64 tile 64x64x128 round $round"
          for extra in "" "--causal" "--mask-sparsity 0.75"; do
            VKFLASH_COOPMAT2_FORWARD_TILE=64x64x128 run --kernel coopmat2 --b 4 --h 32 --n 4096 --d 64 --mode fwd --mask $extra
          done
        done
        cli=build-lab/q128/vkflash
        echo "== q128 D=64 default tile round $round"
        run --kernel coopmat2 --b 4 --h 32 --n 4096 --d 64 --mode fwd --mask
      done > "$out/staged.log" 2>&1
      compact "$out/staged.log"
      for v in q128 biasstaged; do
        for d in 64 128; do
          echo "== check $v D=$d"
          for extra in "" "--causal"; do
            VKFLASH_COOPMAT2_FORWARD_TILE=64x64x128 VKFLASH_KERNELS=coopmat2 build-lab/$v/vkflash check --b 2 --hq 4 --hkv 2 \
              --nq 512 --nk 1024 --d $d --dtype f16 --mask $extra 2>&1 | grep -E "kernel|error|PASS|FAIL"
          done
        done
      done
      ;;
    modtiles)
      for round in 1 2; do
        for tile in 128x64x256 64x64x128; do
          echo "== modifiers D=128 tile $tile round $round"
          cli=build-lab/q128/vkflash
          for extra in "--softcap 50" "--alibi" "--sinks" "--softcap 50 --alibi --sinks"; do
            VKFLASH_COOPMAT2_FORWARD_TILE=$tile run --kernel coopmat2 --b 4 --h 16 --n 4096 --d 128 --mode fwd $extra
          done
          VKFLASH_COOPMAT2_FORWARD_TILE=$tile run --kernel coopmat2 --b 1 --h 16 --n 16384 --d 128 --mode fwd --softcap 50
          VKFLASH_COOPMAT2_FORWARD_TILE=$tile run --kernel coopmat2 --b 1 --h 16 --n 16384 --d 128 --mode fwd
        done
      done > "$out/modtiles.log" 2>&1
      compact "$out/modtiles.log"
      ;;
    table)
      sweep 2 "128 64" new score_variant_rows > "$out/table.log" 2>&1
      awk '/_f16/{print $6, $8, $9, $10, $(NF-4), $(NF-3); next}{print}' "$out/table.log"
      ;;
    bwdtiles)
      cli=build-lab/new/vkflash
      for dkdv in 64x48x128 64x32x128; do
        for dq in 64x64x128 64x32x128; do
          echo "== D=128 dkdv $dkdv dq $dq"
          VKFLASH_COOPMAT2_DKDV_TILE=$dkdv VKFLASH_COOPMAT2_DQ_TILE=$dq \
            run --kernel coopmat2 --b 4 --h 16 --n 4096 --d 128 --mode bwd --softcap 50
        done
      done > "$out/bwdtiles.log" 2>&1
      for dkdv in 64x128x128 64x64x128; do
        for dq in 128x64x128 128x32x128 64x64x128; do
          echo "== D=64 dkdv $dkdv dq $dq"
          VKFLASH_COOPMAT2_DKDV_TILE=$dkdv VKFLASH_COOPMAT2_DQ_TILE=$dq \
            run --kernel coopmat2 --b 4 --h 32 --n 4096 --d 64 --mode bwd --softcap 50
        done
      done >> "$out/bwdtiles.log" 2>&1
      awk '/_f16/{print $4, $6, $8, $9, $(NF-4), $(NF-3); next}{print}' "$out/bwdtiles.log"
      ;;
    bwdtiles2)
      cli=build-lab/new/vkflash
      for round in 1 2; do
        for tiles in "default default" "64x64x128 64x64x128" "default 64x64x128"; do
          set -- $tiles
          echo "== D=64 dkdv $1 dq $2 round $round"
          for extra in "" "--softcap 50" "--alibi" "--mask" "--softcap 50 --alibi --sinks" "--causal --softcap 50 --alibi --sinks"; do
            env $([ "$1" = default ] || echo VKFLASH_COOPMAT2_DKDV_TILE=$1) $([ "$2" = default ] || echo VKFLASH_COOPMAT2_DQ_TILE=$2) \
              "$cli" bench --no-naive --runs 20 --min-time-ms 200 --kernel coopmat2 --b 4 --h 32 --n 4096 --d 64 --mode bwd $extra 2>&1 |
              grep -E "^ +[0-9]|error"
          done
        done
      done > "$out/bwdtiles2.log" 2>&1
      awk '/_f16/{print $8, $9, $(NF-4), $(NF-3); next}{print}' "$out/bwdtiles2.log"
      ;;
    final)
      for v in new new2; do
        cli=build-lab/$v/vkflash
        echo "== $v"
        for extra in "" "--softcap 50" "--softcap 50 --alibi --sinks" "--causal --softcap 50 --alibi --sinks"; do
          run --kernel coopmat2 --b 4 --h 32 --n 4096 --d 64 --mode bwd $extra
        done
        run --kernel coopmat2 --b 4 --h 16 --n 4096 --d 128 --mode bwd --softcap 50
      done > "$out/final.log" 2>&1
      awk '/_f16/{print $6, $8, $9, $(NF-4), $(NF-3); next}{print}' "$out/final.log"
      build=build-lab/new2
      catch_tests sc-bwd '"softcap: backward matches*","softcap: scores far past*","score variants: rows that see no key*"' &
      catch_tests sc-fwd '"softcap: forward matches*","ALiBi: forward matches*"' &
      catch_tests sc-seq '"score variants with KV lengths*","score variants over a KV cache*"' &
      catch_tests tiles '"cooperative matrix 2 tiles follow*"' &
      wait
      report sc-bwd sc-fwd sc-seq tiles
      ;;
    combined)
      build=build-lab/new2
      catch_tests all-bwd '"*sinks together with causal masks and windows: backward"' &
      catch_tests all-fwd '"*sinks together with causal masks and windows: forward"' &
      wait
      report all-bwd all-fwd
      ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
