#!/usr/bin/env bash
# 2026-11-27, issue 23: bias tiles loaded early (docs/tuning-log.md, "a float16 bias loaded early").
# Carry [".gpu", ".gl", "build-lab"], build-lab/ holding:
#   new/vkflash, new/tests/vkflash_tests, new/CMakeCache.txt   this change's build-gpu: the coopmat2
#                    forward loads a float16 bias tile before staging K and V, as it stored it, and
#                    converts it where it adds it (a float32 one was loaded there already)
#   base/vkflash     the commit before it
#   bwdfirst/vkflash the change, and the coopmat2 gradient kernels load their bias tile before the
#                    step's staging loads too (converted at once)
# and run `bash tools/lab/runs/2026-11-27-bias-early.sh bench|tests`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

# D H ROUND BUILD: the plain kernel (base only), float32 and float16 bias.
bias_rows() {
  local d=$1 h=$2 v=$4
  [ $v = base ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both
  run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask
  run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --mask-dtype f16
}

if [ "$part" = bench ]; then
  sweep 2 "128 64" "base new bwdfirst" bias_rows
  echo "== registers"
  for v in base new bwdfirst; do
    echo "-- $v"
    VKFLASH_PIPELINE_STATISTICS=1 build-lab/$v/vkflash bench --no-naive --runs 2 --warmup 1 --warmup-ms 0 --min-time-ms 0 \
      --kernel coopmat2 --b 1 --h 16 --n 4096 --d 128 --mode both --mask --mask-dtype f16 2>&1 |
      grep -iE "coopmat2|register|spill|local" | head -30
  done
fi

if [ "$part" = tests ]; then
  TEST_TIMEOUT=${TEST_TIMEOUT:-300} catch_tests mask_forward \
    '"masks: forward matches*","masks: rows the mask*","masks: a padding*","masks with sequences*"'
  report mask_forward
fi
