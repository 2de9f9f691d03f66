#!/usr/bin/env bash
# 2026-11-29 (nineteenth session), issue 22: the scalar dK/dV kernel's S and dP one vector of a word
# at a time, so that the widened K and V of half a word stay alive instead of a whole word's (the
# same products in the same order: the same bits). Its registers decide how many workgroups an SM
# holds (175 at a71b72e: two of 128 invocations; 168 or fewer: three; worked out from the
# register file). docs/tuning-log.md, "five levers for the scalar backward", "The dK/dV kernel's
# words a vector at a time". Builds (build-lab/NAME): new a71b72e; hv 58559c4 (reverted after this
# run).
# Parts:
#   bench  the scalar backward, float16, B = 4, N = 4096, H = 2048 / D: D = 128 (also causal, and
#          at 32 KB and 16 KB of shared memory) and D = 64, one round; the driver's statistics at
#          D = 128; then `[backward]` with the scalar family forced (build-lab/hv).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-scalar-dkdv-half-words.sh bench`.
part=${1:-bench}
export VKFLASH_BUILD_DIR=build-lab/hv
source tools/lab/runs/run_env.sh  # the GPU environment (build-lab/hv), $out, run, sweep
case "$part" in
  bench)
    sweep 1 "128 64" "new hv" scalar_backward_rows
    for v in new hv; do
      echo "== statistics $v"
      statistics "$v" scalar 128 bwd | grep dkdv
    done
    TEST_TIMEOUT=${TEST_TIMEOUT:-150} catch_tests hv-backward '"[backward]"' VKFLASH_KERNELS=scalar
    report hv-backward
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
