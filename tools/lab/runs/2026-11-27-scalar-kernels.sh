#!/usr/bin/env bash
# 2026-11-27, issue 22: the register-tiled scalar kernels' instructions per product (read from the
# driver's machine code with tools/lab/dump_sass.py --all): K staged as floats, 32 keys per float16
# partial of P V, S's products as fused multiply-add chains, the forward's loops unrolled by hand
# (docs/tuning-log.md, "the scalar forward's instructions"). Carry [".gpu", ".gl", "build-lab"],
# build-lab/ holding the builds each part names (BUILD/vkflash; also new/tests/vkflash_tests and
# new/CMakeCache.txt), and for `sass` .gpu/zstd/ (bookworm's zstd and libzstd1 .debs). Run
# `bash tools/lab/runs/2026-11-27-scalar-kernels.sh PART`:
#   variants     base (the commit before), widek (K as floats), widek32 (... and 32 keys per
#                partial), v1 (... and fma chains, forward and backward), v2 (... and P V 4 keys
#                per iteration), v3 (... and S 2 words per iteration): the forward, two rounds
#   sass         the forward's machine code of $VARIANTS (base v3)
#   bench        base against new (the change), both passes, float32 storage, causal
#   tiles        the mobile limits: the table's tile, and forced tiles with K as halves or floats
#   gradients    base, new and bwdunroll (the gradient kernels' loops unrolled the same way)
#   tests        new's [forward], [backward], [softcap], [mask], [window] tests, scalar forced
#   tests-masks  the [mask] tests that `tests` did not reach in its 400 s
part=${1:-bench}
RUNS=${RUNS:-20}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

# scalar_rows MODE D BUILD...: one bench row per build, at B = 4, N = 4096, H * D = 2048.
scalar_rows() {
  local mode=$1 d=$2 v
  shift 2
  for v in "$@"; do
    cli=build-lab/$v/vkflash
    echo "== $mode $v D=$d ${limit:+shared $limit}"
    run --kernel scalar --b 4 --h $((2048 / d)) --n 4096 --d "$d" --mode "$mode"
  done
}
# registers BUILD MODE: the driver's register count of each scalar pipeline the build creates.
registers() {
  echo "== registers $1"
  VKFLASH_PIPELINE_STATISTICS=1 build-lab/$1/vkflash bench --no-naive --runs 2 --warmup 1 --warmup-ms 0 \
    --min-time-ms 0 --kernel scalar --b 1 --h 16 --n 1024 --d 128 --mode "$2" 2>&1 |
    grep -oE "statistics [a-z0-9_]+|Register Count=[0-9]+" | paste - -
}

case "$part" in
  variants)
    for round in 1 2; do
      for d in 128 64; do scalar_rows fwd $d base widek widek32 v1 v2 v3; done
    done
    # D = 128 tiles with K as floats (fewer rows and more keys per invocation: fewer Q conversions).
    for tile in 64x32x4x2 32x32x4x1 64x32x8x4; do
      echo "-- tile $tile"
      VKFLASH_SCALAR_FORWARD_TILE=$tile scalar_rows fwd 128 base widek
    done
    for v in base widek32 v1 v2 v3; do registers $v fwd; done
    ;;
  sass)
    for v in ${VARIANTS:-base v3}; do sass "$v" --kernel scalar --b 1 --h 16 --n 1024 --d 128 --mode fwd; done
    ;;
  bench)
    for round in 1 2; do
      for d in 128 64; do
        for mode in fwd bwd; do scalar_rows $mode $d base new; done
      done
    done
    for v in base new; do
      cli=build-lab/$v/vkflash
      echo "== $v D=128 float32 storage"
      run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode fwd --dtype f32
      echo "== $v D=128 float16 arithmetic off"
      VKFLASH_DISABLE_FLOAT16_ARITHMETIC=1 run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode fwd
      echo "== $v D=128 causal"
      run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode fwd --causal
    done
    registers new both
    ;;
  tiles)
    for limit in 32768 16384; do
      export VKFLASH_MAX_SHARED_BYTES=$limit
      scalar_rows fwd 128 base new
      echo "-- without subgroup operations"
      VKFLASH_DISABLE_SUBGROUP_OPS=1 scalar_rows fwd 128 base new
      unset VKFLASH_MAX_SHARED_BYTES
    done
    cli=build-lab/new/vkflash
    for t in 32768:32x32x8x2 32768:32x16x8x2 32768:32x16x4x1 16384:16x16x8x2 16384:16x16x4x2 16384:16x8x8x2 16384:16x8x4x1 16384:32x8x8x2; do
      echo "== shared ${t%%:*} tile ${t#*:} new D=128"
      VKFLASH_MAX_SHARED_BYTES=${t%%:*} VKFLASH_SCALAR_FORWARD_TILE=${t#*:} run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode fwd
    done
    ;;
  gradients)
    for round in 1 2; do
      for d in 128 64; do RUNS=10 scalar_rows bwd $d base new bwdunroll; done
    done
    registers bwdunroll bwd
    ;;
  tests)  # not the CLI's tests: they need the CLI at its build path
    TEST_TIMEOUT=${TEST_TIMEOUT:-400} catch_tests scalar_a '"[forward]~[cli]"' VKFLASH_KERNELS=scalar &
    TEST_TIMEOUT=${TEST_TIMEOUT:-400} catch_tests scalar_b '"[backward]~[cli],[softcap]~[cli],[mask]~[cli],[window]~[cli]"' \
      VKFLASH_KERNELS=scalar &
    wait
    report scalar_a scalar_b
    ;;
  tests-masks)
    TEST_TIMEOUT=${TEST_TIMEOUT:-400} catch_tests scalar_c \
      '"masks: tiles the mask closes*","masks: loops of more than 1024*","masks: the bias*","masks: the gradient of a bias*","mask parameters*","masks with sequences*"' \
      VKFLASH_KERNELS=scalar
    report scalar_c
    ;;
esac
