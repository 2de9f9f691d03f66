#!/usr/bin/env bash
# 2026-11-29, on an H200, issue 22: three levers timed against build-lab/cur (be0ecf0), one part
# per device run; docs/tuning-log.md, "P V's P in groups, dK/dV in disjoint rows, V's row guards
# per tile", has the results.
# `bench`: build-lab/new held the working tree with
#   - the scalar forward's P stored lane-major in groups of 4 keys (one f16vec4 / vec4 shared load
#     per row feeds 4 keys of P V, instead of one load per key and row), the group's 4 keys a loop;
#   - the coopmat2 dK/dV kernel's dK and dV stored into disjoint tile rows and copied out together
#     (two barriers fewer);
# timed against cur, two rounds: the scalar forward (plain, causal, at 16 KB) and the coopmat2
# backward (plain, float32 bias) at D = 128 and 64; then the Catch2 tests that reach the changed
# kernels, scalar forced (forward) and auto (coopmat2 backward), under trixie's validation layer.
# `pg2`: build-lab/pg2, the groups' 4 keys written out and P stored as whole groups, against cur,
# two rounds, and both builds' machine code (sass); then the [cli] cases of
# 2026-11-29-gpu-tests.sh with the CLI in place (build-lab/new held be0ecf0 again).
# `guard`: build-lab/new, the scalar forward keeping V's per-row maxima only in the tiles that need
# the band's mask (the only ones that read them), against cur, two rounds; the O and LSE of both
# builds compared bit for bit (bitcmp_inputs: float16 inputs, every 7th V row's first 3 columns
# past the float16 partials' guard in two of the three sets); the scalar tests, scalar forced, with
# and without subgroups.
# `guard2`: the same as `guard` for build-lab/new holding two stagers instead, with and without the
# per-row maxima, picked per tile (no per-word branch in the staging loop).
# `guard2-code`: the driver's statistics (registers, local and shared memory) of the scalar forward
# of cur and build-lab/guard2 (guard2's build) at D = 128 and 64, and their machine code at D = 64
# (sass), for why D = 64 ran slower without the row atomics.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-p-groups.sh bench|pg2|guard|guard2|guard2-code`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, sass

scalar_rows() {
  echo "-- scalar forward"; run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  echo "-- scalar forward causal"; run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
  echo "-- scalar forward 16 KB"; VKFLASH_MAX_SHARED_BYTES=16384 RUNS=10 run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
}
# The Catch2 cases that reach the scalar forward.
scalar_spec='"[scalar],[nonfinite],forward matches the float64*,causal rows*,masks: forward*,masks: keys far*,sliding windows: forward*,softcap: forward*,sinks: *,varlen: *,KV lengths*,chunked passes*"'

# Inputs for the bit-for-bit comparison, into build-lab/bitcmp where missing: float16 Q, K, V
# ([B, H, Nq / Nk, D]), every 7th V row's first 3 columns scaled past the float16 partials' guard.
bitcmp_inputs() {
  [ -f build-lab/bitcmp/c_v.npy ] && return
  mkdir -p build-lab/bitcmp
  python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(3)
for name, (b, h, nq, nk, d, big) in {"a": (2, 4, 200, 333, 128, True), "b": (1, 2, 129, 257, 64, True),
                                     "c": (1, 2, 64, 64, 128, False)}.items():
    q = rng.standard_normal((b, h, nq, d)).astype(np.float16)
    k = rng.standard_normal((b, h, nk, d)).astype(np.float16)
    v = rng.standard_normal((b, h, nk, d)).astype(np.float32)
    if big:
        v[:, :, ::7, :3] *= 5000
    for tensor, x in (("q", q), ("k", k), ("v", v.astype(np.float16))):
        np.save(f"build-lab/bitcmp/{name}_{tensor}.npy", x)
PY
}

rows() {
  scalar_rows "$@"
  echo "-- coopmat2 backward"; run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd
  echo "-- coopmat2 backward, float32 bias"; run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --mask
}

case $part in
  bench)
    sweep 2 "128 64" "cur new" rows 2>&1 | tee "$out/bench.txt"
    build=build-lab/new
    backward_spec='"backward matches the float64 reference gradients on device limits,masks: backward*,masks: rows the mask*,a row a key cannot reach*,stored dS*,deterministic = false sums*,sliding windows: backward*,softcap: backward*,ALiBi: backward*,sinks: backward*,softcap\, ALiBi and sinks together with causal masks and windows: backward"'
    TEST_TIMEOUT=300 catch_tests backward "$backward_spec" &
    TEST_TIMEOUT=300 scalar_tests "" "$scalar_spec"  # waits for the backward's tests too
    report backward
    ;;
  pg2)
    sweep 2 "128 64" "cur pg2" scalar_rows 2>&1 | tee "$out/bench.txt"
    for v in cur pg2; do sass $v --kernel scalar --b 1 --h 2 --n 1024 --d 128 --mode fwd; done
    build=build-lab/new
    link_cli
    TEST_TIMEOUT=200 catch_tests cli '"CLI backward refuses bad input*,CLI backward writes dQ*,CLI --mask and --dbias*,CLI forward and backward with --softcap*"'
    report cli
    ;;
  guard|guard2)
    sweep 2 "128 64" "cur new" scalar_rows 2>&1 | tee "$out/bench.txt"
    bitcmp_inputs
    for n in a b c; do
      for opt in "" "--causal" "--window 40,3" "--window -1,-1" "--causal --window 5,0"; do
        for v in cur new; do
          VKFLASH_KERNELS=scalar build-lab/$v/vkflash forward --q build-lab/bitcmp/${n}_q.npy --k build-lab/bitcmp/${n}_k.npy \
            --v build-lab/bitcmp/${n}_v.npy --out /tmp/o_$v.npy --lse /tmp/l_$v.npy $opt > /dev/null 2>&1 || echo "$v failed"
        done
        cmp -s /tmp/o_cur.npy /tmp/o_new.npy && cmp -s /tmp/l_cur.npy /tmp/l_new.npy && echo "$n $opt: identical" || echo "$n $opt: DIFFER"
      done
    done
    build=build-lab/new
    TEST_TIMEOUT=${TEST_TIMEOUT:-240} scalar_tests "" "$scalar_spec"
    ;;
  guard2-code)
    for v in cur guard2; do
      for d in 128 64; do
        echo "== statistics $v D=$d"
        statistics $v scalar $d fwd
      done
      sass $v --kernel scalar --b 1 --h 2 --n 1024 --d 64 --mode fwd
    done
    ;;
esac
