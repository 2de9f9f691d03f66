#!/usr/bin/env bash
# 2026-11-27, issue 23: the coopmat2 kernels add a float mask to S as a matrix (coopmat2/bias_tiles.glsl)
# instead of reading it per score (docs/tuning-log.md, "the bias as a matrix"). Carry
# [".gpu", ".gl", "build-lab"], build-lab/ holding:
#   new/vkflash, new/tests/vkflash_tests, new/CMakeCache.txt   this change's build-gpu
#   base/vkflash                                               the commit before it (3e50f72)
#   tanh/vkflash                                               this change, softcap through GLSL's tanh()
#   clamped, prefetch, noskip/vkflash  variants (tools/lab/build_variant.py) of the commit's first
#     version: clamped: every bias tile loaded clamped to the edge; prefetch: the forward loads a
#     step's bias before staging its K and V (kept, for float32 biases); noskip: no kernel skips the
#     tiles the mask closes (timing only).
# and run `bash tools/lab/runs/2026-11-27-bias-tiles.sh tests|bench|variants|mask-tests`. Earlier
# variants of the same entry (nobias: no bias added at all; tanh: the softcap through GLSL's
# tanh()) were built the same way.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

if [ "$part" = tests ]; then
  VKFLASH_KERNELS=auto timeout 420 bash -c "trixie_run $build/tests/vkflash_tests '[mask],[softcap],[alibi],[sinks],[window]~[cli]'" \
    > "$out/variants_auto.log" 2>&1 &
  VKFLASH_KERNELS=auto timeout 420 bash -c "trixie_run $build/tests/vkflash_tests '[decode],[sequences],[nonfinite]~[cli]'" \
    > "$out/decode_auto.log" 2>&1 &
  VKFLASH_KERNELS=coopmat_khr timeout 420 bash -c "trixie_run $build/tests/vkflash_tests '[mask]~[cli]'" \
    > "$out/mask_coopmat_khr.log" 2>&1 &
  VKFLASH_KERNELS=scalar timeout 420 bash -c "trixie_run $build/tests/vkflash_tests '[mask]~[cli]'" \
    > "$out/mask_scalar.log" 2>&1 &
  wait
  for log in variants_auto decode_auto mask_coopmat_khr mask_scalar; do
    echo "== $log"
    grep -E -A12 "FAILED|passed|failed" "$out/$log.log" | head -40
  done
fi

if [ "$part" = bench ]; then
  for round in 1 2; do
    for d in 128 64; do
      h=$((2048 / d))
      for cli in build-lab/base/vkflash build-lab/new/vkflash; do
        echo "== $cli D=$d round $round"
        [ $round = 1 ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both
        run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask
        run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --mask-dtype f16
        [ $round = 1 ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --mask-dtype bool
        [ $round = 1 ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --causal
        [ $round = 1 ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --mask-sparsity 0.75
      done
    done
  done
  for d in 128 64; do
    h=$((2048 / d))
    for cli in build-lab/new/vkflash build-lab/tanh/vkflash; do
      echo "== $cli D=$d softcap"
      run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --softcap 50
    done
  done
  echo "== softcap accuracy through tanh()"
  for cli in build-lab/new/vkflash build-lab/tanh/vkflash; do
    "$cli" check --b 2 --hq 8 --hkv 2 --nq 1024 --nk 1024 --d 128 --dtype f16 --softcap 20 --repeats 1 2>&1 | grep -E "error|PASS|FAIL"
  done
  for cli in build-lab/base/vkflash build-lab/new/vkflash; do
    echo "== $cli decode"
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask
  done
  echo "== registers"
  for cli in build-lab/base/vkflash build-lab/new/vkflash; do
    VKFLASH_PIPELINE_STATISTICS=1 "$cli" bench --no-naive --runs 2 --warmup 1 --warmup-ms 0 --min-time-ms 0 --kernel coopmat2 \
      --b 1 --h 16 --n 4096 --d 128 --mode both --mask 2>&1 | grep -iE "coopmat2|register|spill|local" | head -30
  done
fi

if [ "$part" = variants ]; then
  for round in 1 2; do
    for d in 128 64; do
      h=$((2048 / d))
      for v in base new clamped prefetch noskip; do
        cli=build-lab/$v/vkflash
        echo "== $cli D=$d round $round"
        [ $round = 1 ] && case $v in base|new) run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both;; esac
        run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask
        [ $round = 1 ] && [ $v != base ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --mask-dtype f16
      done
    done
  done
fi

if [ "$part" = mask-tests ]; then
  VKFLASH_KERNELS=auto timeout ${TEST_TIMEOUT:-300} bash -c "trixie_run $build/tests/vkflash_tests -d yes ${TESTS:-'[mask]~[cli]'}" \
    > "$out/mask_auto.log" 2>&1
  grep -E -A12 "FAILED|passed|failed" "$out/mask_auto.log" | head -40
fi
