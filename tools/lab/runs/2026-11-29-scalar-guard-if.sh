#!/usr/bin/env bash
# 2026-11-29 (eighteenth session), issue 22: the scalar forward's V guard with its shared atomics
# only where a word could overflow a float16 partial. docs/tuning-log.md, "the scalar forward's V
# guard by rare atomics". Builds (tools/lab/build_variant.py; build-lab/NAME):
#   new      9078b9c;
#   guardif  new with each staged V word's atomicMax into its row's slot, and each invocation's into
#            the tile's, only where the value is at least float16 2048 (FLOAT16_PARTIAL_SAFE_BITS):
#            a slot then holds 0 or its largest unsafe value, and every read of it only compares
#            with that bound, so the results are the same bits.
# Parts:
#   bench  the scalar forward at D = 128 and 64, plain, causal and at 16 KB of shared memory,
#          new and guardif, two rounds, with `vkflash check` of both (scalar, float16).
#   tests  build-lab/new holding the change (with its test binary): `[scalar]` and `[nonfinite]` with
#          the scalar family forced, with and without subgroup operations. (Its first run, started
#          beside another lab script, ended in a bus error before any test: two scripts setting up
#          the GPU environment at once. Run it alone.)
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-scalar-guard-if.sh bench|tests`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment (build-lab/new), $out, run, sweep

scalar_rows() {
  run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
  VKFLASH_MAX_SHARED_BYTES=16384 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
}
case "$part" in
  bench)
    sweep 2 "128 64" "new guardif" scalar_rows
    for v in new guardif; do
      for extra in "" "--causal" "--mask --softcap 20"; do
        echo "== check $v $extra"
        VKFLASH_KERNELS=scalar build-lab/$v/vkflash check --dtype f16 --d 128 --repeats 0 $extra 2>&1 | grep -E "relative|PASS|FAIL"
      done
    done
    ;;
  tests) TEST_TIMEOUT=${TEST_TIMEOUT:-240} scalar_tests guard- '"[scalar],[nonfinite]"' ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
