#!/usr/bin/env bash
# 2026-11-29 (nineteenth session), issue 22: the scalar gradient kernels' sums over a step's
# streamed rows read the scores (P^T and dS^T, dS) a vector of streamed rows per shared load instead
# of one float per load. docs/tuning-log.md, "five levers for the scalar backward", "The scores as
# vectors".
# Builds (build-lab/NAME):
#   head0  933de30 (f21a758's kernels at the table's tiles: one score per load, row stride + 1);
#   new    5cf3bb2 (reverted after this run): VKF_TILED_GRADIENT_SCORES_PER_LOAD 4 (vec4 loads, row stride + 4);
#   sv2    new with 2 (vec2 loads): `python3 tools/lab/build_variant.py sv2
#          shaders/common/shader_interface.h "#define VKF_TILED_GRADIENT_SCORES_PER_LOAD 4"
#          "#define VKF_TILED_GRADIENT_SCORES_PER_LOAD 2"` at 5cf3bb2.
# Parts:
#   bench  the scalar backward at D = 128 and 64 (B = 4, N = 4096, H = 2048 / D), causal at
#          D = 128, and at 32 KB and 16 KB of shared memory at D = 128; the forward once per
#          head dim (head0, first round) for the ratio; two rounds.
#   tests  build-lab/new (with its test binary): `[backward]`, `[scalar]`, `[nonfinite]`, `[window]`
#          and `[mask]` with the scalar family forced. The logged run set TEST_TIMEOUT=300.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-scalar-score-vectors.sh bench|tests`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment (build-lab/new), $out, run, sweep
case "$part" in
  bench) FORWARD_BUILD=head0 sweep 2 "128 64" "head0 new sv2" scalar_backward_rows ;;
  tests)
    TEST_TIMEOUT=${TEST_TIMEOUT:-240} catch_tests sv-scalar '"[backward],[scalar],[nonfinite],[window],[mask]"' \
      VKFLASH_KERNELS=scalar
    report sv-scalar
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
