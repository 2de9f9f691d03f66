#!/usr/bin/env bash
# 2026-11-29 (twelfth session), issue 23: the coopmat2 forward's softcap applied element by element
# (it needs no row or column) with the softmax scale folded into its power, where it is the only
# per-element modifier, instead of the scale as a matrix multiply and then a per-element callback.
# docs/tuning-log.md, "the coopmat2 forward's softcap element by element" (not kept). Builds, each a CLI in
# build-lab/NAME (tools/lab/build_variant.py):
#   cur          the committed code (fecaa91);
#   softcapfold  the change: in the key loop, where softcap_alone(), s[i] = softcapped_scaled(s[i],
#                softcap_power) over s.length(), the factor pc.scale_log2 * 2 / C computed before
#                the loop and the formula in a second function beside softcapped (first run);
#   new          the same, written to keep the formula in one function (softcapped(t) calling
#                softcap_from_power(t * 2 / C)) and the factor computed in the loop, with its test
#                binary in build-lab/new/tests (second run).
# Parts:
#   bench  B = 4, N = 4096, H = 2048 / D, coopmat2 forward: plain, --softcap 50, --softcap 50
#          --causal, D = 128 and 64, cur and softcapfold, two rounds;
#   confirm  the bench's rows with cur and new, two rounds; then the [softcap] tests of
#          build-lab/new under trixie's validation layer (the kernels `auto` picks: coopmat2),
#          with the CLI linked for its [cli] cases, stopped after $TEST_TIMEOUT s (600; the logged
#          run, without link_cli and at 300 s, stopped in the 7th of the tag's 13 cases);
#   check  `vkflash check` of softcapfold against the CPU's float64, coopmat2 forced, float16:
#          softcap 20 and 50, causal and not, D = 128 and 64, N = 1024; and with ALiBi and sinks
#          (the callback path).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-softcap-fold.sh bench check`,
# then `... confirm` (one part at least: no part given runs nothing).
RUNS=${RUNS:-20}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep

softcap_rows() {
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --softcap 50
  run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --softcap 50 --causal
}
for part in "$@"; do
  case "$part" in
    bench) sweep 2 "128 64" "cur softcapfold" softcap_rows ;;
    confirm)
      sweep 2 "128 64" "cur new" softcap_rows
      link_cli
      TEST_TIMEOUT=${TEST_TIMEOUT:-600} catch_tests softcap-tests '"[softcap]"'
      report softcap-tests
      ;;
    check)
      for d in 128 64; do
        for cap in 20 50; do
          for causal in "" --causal; do
            echo "== D=$d softcap $cap $causal"
            VKFLASH_KERNELS=coopmat2 build-lab/softcapfold/vkflash check --b 2 --hq 4 --nq 1024 --nk 1024 --d $d --dtype f16 \
              --softcap $cap $causal 2>&1 | grep -E "error|PASS|FAIL"
          done
        done
        echo "== D=$d softcap 50 alibi sinks"
        VKFLASH_KERNELS=coopmat2 build-lab/softcapfold/vkflash check --b 2 --hq 4 --nq 1024 --nk 1024 --d $d --dtype f16 \
          --softcap 50 --alibi --sinks 2>&1 | grep -E "error|PASS|FAIL"
      done
      ;;
    *)
      echo "unknown part '$part'" >&2
      exit 2
      ;;
  esac
done
