#!/usr/bin/env bash
# 2026-11-29 (nineteenth session), issue 22: what dV's products in float16 could give the scalar
# backward. docs/tuning-log.md, "five levers for the scalar backward", "dV's products in float16,
# timing only". Builds (build-lab/NAME):
#   new    a71b72e;
#   f16dv  new with tools/lab/runs/2026-11-29-scalar-f16-dv.patch applied (`git apply`, then the
#          build's vkflash copied; the tree restored after): the dK/dV kernel's float16 variant
#          compiled with VKF_FLOAT16_MATH=1, dV += P^T dO in float16 pairs, FLOAT16_TERMS query rows
#          per float16 partial. Timing only: no per-key scale of P (float16's subnormals), no guard
#          on |dO|.
# Parts:
#   bench  the scalar backward, float16, B = 4, N = 4096, H = 2048 / D: D = 128 (also causal, and
#          at 32 KB and 16 KB of shared memory) and D = 64, two rounds; the forward once per head
#          dim (new, first round); the driver's statistics of both builds' kernels at D = 128.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-scalar-f16-dv.sh bench`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment (build-lab/new), $out, run, sweep
case "$part" in
  bench)
    FORWARD_BUILD=new sweep 2 "128 64" "new f16dv" scalar_backward_rows
    for v in new f16dv; do
      echo "== statistics $v"
      statistics "$v" scalar 128 bwd
    done
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
