#!/usr/bin/env bash
# 2026-11-27, issue 23 item 5: tiles a mask closes are skipped (docs/tuning-log.md, "Block-sparse
# masks"). Carry [".gpu", ".gl", "build-lab"], build-lab/ holding:
#   new/vkflash, new/tests/vkflash_tests, new/CMakeCache.txt   this commit's build-gpu
#   head/vkflash                                               the commit before (no summary)
# and run `bash tools/lab/runs/2026-11-27-block-sparse.sh bench|tests|rows`.
#   bench: per family, B=4 N=4096 H*D=2048 fwd+bwd, plain / a float32 bias [1, 1, N, N] open /
#          75% of its 128 x 128 blocks closed; decode shapes; the commit before beside it.
#   tests: the [mask] cases with each family forced, and [decode], under trixie's validation layer.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

if [ "$part" = bench ]; then
  for cli in build-lab/head/vkflash build-lab/new/vkflash; do
    echo "== $cli: decode, B=1 Hq=32 Hkv=8 Nk=16k D=128"
    for nq in 1 4; do
      run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd
      run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd --mask
      [ "$cli" = build-lab/new/vkflash ] && run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd --mask --mask-sparsity 0.75
    done
  done
  for kernel in coopmat2 coopmat_khr coopmat_nv scalar; do
    for d in 128 64; do
      h=$((2048 / d))
      echo "== $kernel D=$d"
      cli=build-lab/head/vkflash
      [ "$kernel" = coopmat2 ] && run --kernel $kernel --b 4 --h $h --n 4096 --d $d --mode both --mask
      cli=build-lab/new/vkflash
      run --kernel $kernel --b 4 --h $h --n 4096 --d $d --mode both
      run --kernel $kernel --b 4 --h $h --n 4096 --d $d --mode both --mask
      run --kernel $kernel --b 4 --h $h --n 4096 --d $d --mode both --mask --mask-sparsity 0.75
    done
  done
fi

if [ "$part" = tests ]; then
  for kernels in auto coopmat_khr coopmat_nv scalar; do
    VKFLASH_KERNELS=$kernels timeout 400 bash -c "trixie_run $build/tests/vkflash_tests '[mask]~[cli]'" \
      > "$out/mask_$kernels.log" 2>&1 &
  done
  timeout 400 bash -c "trixie_run $build/tests/vkflash_tests '[decode]~[cli]'" > "$out/decode_auto.log" 2>&1 &
  wait
  for log in mask_auto mask_coopmat_khr mask_coopmat_nv mask_scalar decode_auto; do
    echo "== $log"
    grep -E -A12 "FAILED|passed|failed" "$out/$log.log" | head -40
  done
fi

# The coopmat2 backward's checks, variants (tools/lab/build_variant.py) of the rows walk in the
# dK/dV kernel and the keys walk in the dQ kernel: build-lab/unrolled (the rows walk reading its 32
# words in a loop of constant count), build-lab/stateless (dK/dV reads the summary at every query
# tile, mask_closes_tile), build-lab/dqstateless (dQ does, at every key tile), build-lab/allstateless
# (both). VARIANTS names the folders to run.
if [ "$part" = rows ]; then
  for round in 1 2; do
    for cli in build-lab/head/vkflash build-lab/new/vkflash ${VARIANTS:-unrolled stateless}; do
      [ -x "$cli" ] || cli=build-lab/$cli/vkflash
      echo "== $cli, round $round"
      for d in 128 64; do
        run --kernel coopmat2 --b 4 --h $((2048 / d)) --n 4096 --d $d --mode bwd --mask
        [ "$cli" = build-lab/head/vkflash ] && continue
        run --kernel coopmat2 --b 4 --h $((2048 / d)) --n 4096 --d $d --mode bwd --mask --mask-sparsity 0.75
      done
    done
  done
fi
