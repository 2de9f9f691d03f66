#!/usr/bin/env bash
# The coopmat2 backward's two gradient kernels timed apart (issue 22, nondeterministic backward):
# build-lab/nodq has no dQ dispatch, build-lab/nodkdv no dK/dV dispatch (timing-only, wrong
# gradients), beside the committed CLI and PyTorch's flash backward, D = 128 and 64, B = 4, N = 4096.
source tools/lab/runs/run_env.sh
RUNS=20
for round in 1 2; do
  for d in 128 64; do
    for v in new nodq nodkdv; do
      cli=build-lab/$v/vkflash
      echo "== $v D=$d round $round"
      run --kernel coopmat2 --b 4 --h $((2048 / d)) --n 4096 --d $d --mode bwd
      run --kernel coopmat2 --b 4 --h $((2048 / d)) --n 4096 --d $d --mode bwd --causal
    done
  done
done
python3 tools/lab/pytorch_flash_backward.py 4096 128,64
