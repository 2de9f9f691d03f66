#!/usr/bin/env bash
# Stored dS in the coopmat2 backward (issue 22, deterministic = false): `tests` runs the tests that
# exercise it (auto-chosen kernels, and stored dS forced); `bench` times the backward at B = 4,
# N = 4096, H = 2048 / D with the deterministic kernels, stored dS (whole: 4096 MiB; in chunks: the
# default 1024 MiB) and, where AtomicDqPays would not choose it, atomic dQ forced; then PyTorch's
# flash backward at the same shapes.
source tools/lab/runs/run_env.sh
part=${1:-bench}
if [ "$part" = tests ]; then
  TEST_TIMEOUT=300 catch_tests stored_ds "[stored_ds]"
  TEST_TIMEOUT=300 catch_tests atomic "[atomic]"
  report stored_ds atomic
  exit 0
fi
if [ "$part" = confirm ]; then
  # The committed choice: --nondeterministic as auto picks it (stored dS whole at D = 128 where it
  # fits a sixteenth of the GPU's memory), two rounds, beside the deterministic kernels and PyTorch.
  cli=build-lab/new/vkflash
  for round in 1 2; do
    for causal in "" --causal; do
      echo "== N=4096 D=128 $causal round $round"
      run --b 4 --h 16 --n 4096 --d 128 --mode bwd $causal
      run --b 4 --h 16 --n 4096 --d 128 --mode bwd $causal --nondeterministic
    done
    echo "== N=1024 D=128 round $round"
    run --b 16 --h 16 --n 1024 --d 128 --mode bwd
    run --b 16 --h 16 --n 1024 --d 128 --mode bwd --nondeterministic
  done
  part=pytorch
fi
if [ "$part" = split ]; then
  # Where stored dS's time goes (timing-only builds: nodqds without the dQ dispatch, nostore
  # without the dS store, nostore_nodqds without both), whole (4096 MiB), D = 128; then the dQ
  # kernel's tiles (VKFLASH_COOPMAT2_DQ_TILE, OxSxW).
  export VKFLASH_STORED_DS_MAX_MIB=4096
  for round in 1 2; do
    for v in new nodqds nostore nostore_nodqds; do
      cli=build-lab/$v/vkflash
      echo "== $v round $round"
      run --b 4 --h 16 --n 4096 --d 128 --mode bwd --nondeterministic
    done
  done
  cli=build-lab/new/vkflash
  for tile in 64x32x128 128x64x128 128x32x128 128x64x256 128x32x256 64x64x64; do
    echo "== dQ tile $tile"
    VKFLASH_COOPMAT2_DQ_TILE=$tile run --b 4 --h 16 --n 4096 --d 128 --mode bwd --nondeterministic
  done
  exit 0
fi
if [ "$part" = bench ]; then
cli=build-lab/new/vkflash
RUNS=20
# The FlashAttention grid's B * N = 16384, H * D = 2048: deterministic, then deterministic = false
# (stored dS where AtomicDqPays does not choose atomics), and at N = 4096 D = 128 stored dS whole.
for n in 1024 4096 16384; do
  b=$((16384 / n))
  for d in 128 64; do
    h=$((2048 / d))
    for causal in "" --causal; do
      echo "== N=$n D=$d $causal"
      run --b $b --h $h --n $n --d $d --mode bwd $causal
      run --b $b --h $h --n $n --d $d --mode bwd $causal --nondeterministic
    done
  done
done
echo "== N=4096 D=128, stored dS whole (4096 MiB)"
VKFLASH_STORED_DS_MAX_MIB=4096 run --b 4 --h 16 --n 4096 --d 128 --mode bwd --nondeterministic
VKFLASH_STORED_DS_MAX_MIB=4096 run --b 4 --h 16 --n 4096 --d 128 --mode bwd --nondeterministic --causal
fi
if [ "$part" = bench ] || [ "$part" = pytorch ]; then
python3 tools/lab/pytorch_flash_backward.py 1024,4096,16384 128,64
fi
