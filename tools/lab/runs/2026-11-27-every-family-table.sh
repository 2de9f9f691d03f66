#!/usr/bin/env bash
# 2026-11-27, issue 22's "done means": its table re-measured in one device run with the kernels as
# they stand, every family forced (`bench --kernel`), both passes, D = 128 and 64, and the mobile
# limits (16 and 32 KB of shared memory, with and without subgroup operations) for the scalar and
# KHR families; PyTorch's FlashAttention-2 (.gpu/sdpa_bench.py) in the same run for the ratio
# (docs/performance.md, "Every family, forced"). Carry [".gpu", ".gl", "build-lab"], build-lab/new
# holding the build to measure (vkflash), and run `bash tools/lab/runs/2026-11-27-every-family-table.sh`.
RUNS=${RUNS:-20}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report
cli=$VKFLASH_BUILD_DIR/vkflash  # build-lab/new unless VKFLASH_BUILD_DIR says otherwise

for d in 128 64; do
  for k in scalar coopmat_khr coopmat_nv coopmat2; do
    for mode in fwd bwd; do
      echo "== $k D=$d $mode"
      run --kernel $k --b 4 --h $((2048 / d)) --n 4096 --d $d --mode $mode
    done
  done
done
for limit in 32768 16384; do
  for subgroups in on off; do
    for k in scalar coopmat_khr; do
      for mode in fwd bwd; do
        echo "== shared $limit subgroups $subgroups $k D=128 $mode"
        if [ $subgroups = on ]; then
          VKFLASH_MAX_SHARED_BYTES=$limit run --kernel $k --b 4 --h 16 --n 4096 --d 128 --mode $mode
        else
          VKFLASH_MAX_SHARED_BYTES=$limit VKFLASH_DISABLE_SUBGROUP_OPS=1 run --kernel $k --b 4 --h 16 --n 4096 --d 128 --mode $mode
        fi
      done
    done
  done
done
echo "== PyTorch scaled_dot_product_attention (N = 4096 rows)"
python3 .gpu/sdpa_bench.py "$out/sdpa.json" 2>&1 | grep -E "\"N\": 4096" | head -20
