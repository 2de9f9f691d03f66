#!/usr/bin/env bash
# 2026-11-27, issue 23's block-sparse goal: a bias with 75% of its 128 x 128 blocks closed runs
# 2.93-2.97x faster than with all open (coopmat2 forward, H100), 3x wanted. `--mask-sparsity` closes
# 75% of all blocks at random, so query tiles differ in how many key tiles they visit (8 of 32 on
# average, more or fewer by ~2.5), and the last workgroups of the dispatch may be long ones. Is that
# tail what is missing? `balanced` (tools/lab/build_variant.py on tools/cli/attention_io.cc) closes
# 75% of each row of blocks instead: the same visited tiles in all, the same per query tile.
# Carry [".gpu", ".gl", "build-lab"] with build-lab/new and build-lab/balanced;
# `bash tools/lab/runs/2026-11-27-block-sparse-balance.sh`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75
}
sweep 2 "128 64" "new balanced" rows
