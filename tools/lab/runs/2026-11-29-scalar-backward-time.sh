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
# The shaders of these builds: tools/lab/runs/2026-11-29-scalar-backward-variants.py.
# Third run (`confirm`): cur 5d8d3cd (dkdv_tscore and dq_tscore where an invocation owns a multiple of
# 4 rows, and dQ's words 4 a trip: scalar/score_tile.glsl), cur_w2 (cur with 2 words a trip),
# comboC and dq_w4 from the second run. Fourth run (`final`): final, the commit after 5d8d3cd (the
# same shaders; the loop count for drivers with a loop budget corrected); fwd_p4 (timing only, not
# kept): cur with the forward's P tile by key, an invocation's 4 rows of a key one f16vec4
# (tools/lab/runs/2026-11-29-scalar-forward-p4.patch: the backward's score tiles' idea applied to
# the forward's P V).
# Parts:
#   first  the machine code of new's backward at D = 128 (sass_new.tgz); the rows below, two rounds:
#          new's forward and backward at D = 128 and 64, the ablations' backward at D = 128, the
#          levers' backward at D = 128 (also causal) and 64.
#   levers new's forward and backward and the second run's levers: D = 128 (also causal, and at 32
#          KB and 16 KB of shared memory) and D = 64, two rounds.
#   confirm the same rows: new, cur and cur_w2 two rounds, comboC and dq_w4 one; the driver's
#          statistics of new and cur; then cur's `[backward]` and `[scalar],[nonfinite]` with the
#          scalar family forced, at once, each stopped after $TEST_TIMEOUT s (380).
#   final  cur's and fwd_p4's scalar forward: D = 128 (also causal, at 32 KB and 16 KB) and D = 64,
#          two rounds; then final's `[mask]` cases with the scalar family forced (stopped after
#          $TEST_TIMEOUT s, 300).
#   unroll the scalar forward of final and of three builds of it with its loops' trips changed in
#          common/shader_interface.h: fs4 (S's loop 4 words a trip instead of 2), fpv8 (P V's 8 keys
#          instead of 4), fs4pv8 (both); two rounds. Then final's `[cli][mask]` case with the scalar
#          family forced, the CLI linked where it runs it.
#   ftests head's (fs4pv8 committed) `[forward]` and `[scalar],[nonfinite]` with the scalar family
#          forced, at once, each stopped after $TEST_TIMEOUT s (240).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-scalar-backward-time.sh first`.
part=${1:-first}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep
bwd() { run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode bwd "${@:3}"; }
base_rows() { run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; bwd "$1" "$2"; }
ablation_rows() { bwd "$1" "$2"; }
lever_rows() { bwd "$1" "$2"; [ "$1" = 128 ] && bwd "$1" "$2" --causal; }
# The scalar forward at D (also causal, at 32 KB and 16 KB where D = 128).
fwd_rows() {
  local d=$1 h=$2
  run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode fwd
  if [ "$d" = 128 ]; then
    run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode fwd --causal
    VKFLASH_MAX_SHARED_BYTES=32768 run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode fwd
    VKFLASH_MAX_SHARED_BYTES=16384 run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode fwd
  fi
}
case "$part" in
  first)
    SASS_DUMP_ARGS=--hex sass new --kernel scalar --mode bwd --d 128 --b 1 --h 2 --n 512 > "$out/sass.txt" 2>&1
    pack_sass new
    for round in 1 2; do  # (first.log labels both rounds "round 1")
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
  confirm)
    export FORWARD_BUILD=new
    build=build-lab/cur  # the tests' binary
    {
      sweep 2 "128 64" "new cur cur_w2" scalar_backward_rows
      sweep 1 "128 64" "comboC dq_w4" scalar_backward_rows
      for v in new cur; do
        echo "== statistics $v"
        statistics "$v" scalar 128 bwd | grep -E "dkdv|dq"
      done
    } > "$out/confirm.log" 2>&1
    cat "$out/confirm.log"
    export TEST_TIMEOUT=${TEST_TIMEOUT:-380}
    catch_tests cur-backward '"[backward]"' VKFLASH_KERNELS=scalar &
    catch_tests cur-scalar '"[scalar],[nonfinite]"' VKFLASH_KERNELS=scalar &
    wait
    report cur-backward cur-scalar
    ;;
  final)
    sweep 2 "128 64" "cur fwd_p4" fwd_rows > "$out/final.log" 2>&1
    cat "$out/final.log"
    build=build-lab/final
    TEST_TIMEOUT=${TEST_TIMEOUT:-300} catch_tests final-mask '"[mask]"' VKFLASH_KERNELS=scalar
    report final-mask
    ;;
  unroll)
    sweep 2 "128 64" "final fs4 fpv8 fs4pv8" fwd_rows > "$out/unroll.log" 2>&1
    cat "$out/unroll.log"
    build=build-lab/final
    link_cli
    TEST_TIMEOUT=${TEST_TIMEOUT:-150} catch_tests final-cli-mask '"[cli][mask]"' VKFLASH_KERNELS=scalar
    report final-cli-mask
    ;;
  ftests)
    build=build-lab/head
    export TEST_TIMEOUT=${TEST_TIMEOUT:-240}
    catch_tests head-forward '"[forward]"' VKFLASH_KERNELS=scalar &
    catch_tests head-scalar '"[scalar],[nonfinite]"' VKFLASH_KERNELS=scalar &
    wait
    report head-forward head-scalar
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
