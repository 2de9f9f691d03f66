#!/usr/bin/env bash
# 2026-11-29 (twentieth session), issue 22: where the scalar backward's time goes at D = 128, and
# its loops unrolled. docs/tuning-log.md, "where the scalar backward's time goes". Builds
# (build-lab/NAME, each from `tools/lab/build_variant.py` on ce6015b): new ce6015b; timing only (the
# gradients wrong): nodq (no dQ dispatch), dkdv_noadd / dq_noadd (no dK, dV or dQ sums: the
# kernels' second half), dkdv_onew / dq_onew (S and dP over one word of the head dim); levers:
# dkdv_sum4 / dq_sum4 / both_sum4 (the sums' loop over streamed rows 4 per iteration), dkdv_w2 /
# dq_w2 (S and dP's loop 2 words per iteration). Second run (`levers`), on ce6015b too: dq_w2 again
# (the odd word's remainder as a loop), dq_w4 (4 words per iteration), dkdv_tscore / dq_tscore (the
# score tiles transposed, so that the sums read an invocation's 4 rows of P^T, dS^T or dS as one
# vec4), comboA (dkdv_sum4 + dq_w2), comboB (comboA with dkdv_tscore), comboC (comboB with dq_tscore).
# Parts:
#   first  the machine code of new's backward at D = 128 (sass_new.tgz); the rows below, two rounds:
#          new's forward and backward at D = 128 and 64, the ablations' backward at D = 128, the
#          levers' backward at D = 128 (also causal) and 64.
#   levers new's forward and backward and the second run's levers: D = 128 (also causal, and at 32
#          KB and 16 KB of shared memory) and D = 64, two rounds.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-scalar-backward-time.sh first`.
part=${1:-first}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep
bwd() { run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd "${@:3}"; }
base_rows() { run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; bwd "$1" "$2"; }
ablation_rows() { bwd "$1" "$2"; }
lever_rows() { bwd "$1" "$2"; [ "$1" = 128 ] && bwd "$1" "$2" --causal; }
case "$part" in
  first)
    SASS_DUMP_ARGS=--hex sass new --kernel scalar --mode bwd --d 128 --b 1 --h 2 --n 512 > "$out/sass.txt" 2>&1
    pack_sass new
    for round in 1 2; do
      sweep 1 "128 64" "new" base_rows
      sweep 1 "128" "nodq dkdv_noadd dq_noadd dkdv_onew dq_onew" ablation_rows
      sweep 1 "128 64" "dkdv_sum4 dq_sum4 both_sum4 dkdv_w2 dq_w2" lever_rows
    done > "$out/first.log" 2>&1
    cat "$out/first.log"
    ;;
  levers)
    export FORWARD_BUILD=new
    sweep 2 "128 64" "new dq_w2 dq_w4 dkdv_tscore dq_tscore comboA comboB comboC" scalar_backward_rows \
      > "$out/levers.log" 2>&1
    cat "$out/levers.log"
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
