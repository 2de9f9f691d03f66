#!/usr/bin/env bash
# 2026-11-29 (fourteenth session): the coopmat2 forward's softcap element by element with the
# softmax scale folded into its power (the twelfth session's `softcapfold`, 1.0-1.7% then on the
# 128x64x256 tile), again on the 64x64x128 tile that softcap calls now take at D = 128. Builds:
# build-lab/new2 (2fb7753's code) and build-lab/new3 (the fold: softcap_alone() and
# softcapped_raw() in common/score_mod.glsl, used by coopmat2/attention_forward_coopmat2.comp at
# every head dim; the kept code uses it at D = 64 only, SOFTCAP_FOLDED).
# `bench`: B = 4, N = 4096, H = 2048 / D, two rounds; `check`: vkflash check of new3 with coopmat2
# forced; `tests`: new3's softcap forward cases on the H200 (trixie's validation layer, auto kernels).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-softcap-fold2.sh bench check tests`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report

fold_rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --softcap 50
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --softcap 50 --causal
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --softcap 50 --sinks
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --softcap 50 --alibi
}

for part in "$@"; do
  case $part in
    bench)
      sweep 2 "128 64" "new2 new3" fold_rows > "$out/bench.log" 2>&1
      awk '/_f16/{print $6, $8, $9, $(NF-4); next}{print}' "$out/bench.log"
      ;;
    check)
      for d in 128 64; do
        for extra in "--softcap 20" "--softcap 50 --causal" "--softcap 30 --sinks"; do
          echo "== D=$d $extra"
          VKFLASH_KERNELS=coopmat2 build-lab/new3/vkflash check --b 2 --hq 4 --hkv 2 --nq 1000 --nk 1024 --d $d \
            --dtype f16 --repeats 1 $extra 2>&1 | grep -E "kernel|error|PASS|FAIL"
        done
      done
      ;;
    tests)
      build=build-lab/new3
      catch_tests fold-fwd '"softcap: forward matches*","softcap: scores far past*"' &
      catch_tests fold-all '"*sinks together with causal masks and windows: forward","score variants: rows that see no key*"' &
      wait
      report fold-fwd fold-all
      ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
