# Sourced by the dated run scripts of this folder, on the GPU machine from the project's root: the
# GPU environment (tools/lab/gpu_env.sh, with the build in build-lab/new unless VKFLASH_BUILD_DIR
# says otherwise), $out for the logs ($OUT, which comes back from the device run), and helpers.
set -uo pipefail
export VKFLASH_BUILD_DIR=${VKFLASH_BUILD_DIR:-build-lab/new}
source tools/lab/gpu_env.sh
out=${OUT:-/tmp}

# run ARGS...: `$cli bench` of one configuration, its table rows only ($RUNS timed runs, 20 unless set).
run() { "$cli" bench --no-naive --runs "${RUNS:-20}" --min-time-ms 200 "$@" 2>&1 | grep -E "^ +[0-9]|error"; }

# sweep ROUNDS "HEAD_DIMS" "BUILDS" FN: for each round, head dim D and build (build-lab/BUILD/vkflash
# as $cli), a header line, then `FN D H ROUND` with H = 2048 / D heads (the FA grid's H * D).
sweep() {
  local rounds=$1 dims=$2 builds=$3 fn=$4 round d v
  for ((round = 1; round <= rounds; ++round)); do
    for d in $dims; do
      for v in $builds; do
        cli=build-lab/$v/vkflash
        echo "== $v D=$d round $round"
        "$fn" "$d" "$((2048 / d))" "$round" "$v"
      done
    done
  done
}

# Rows for sweep: the tensor-core forwards (coopmat2, KHR, NV) at B = 4, N = 4096; the decode
# shapes of issue 21's goal (B = 1, Hq = 32, Hkv = 8, 16k and 128k keys) and a speculative one.
tensor_core_forward_rows() {
  local k
  for k in coopmat2 coopmat_khr coopmat_nv; do
    echo "-- $k"
    run --kernel $k --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  done
}
# Rows for sweep: issue 23's score variants and plain, coopmat2, B = 4, N = 4096, forward and
# backward: plain, softcap 50, ALiBi, sinks, all three, causal, causal + all three, a float32 bias.
score_variant_rows() {
  local mode extra
  for mode in fwd bwd; do
    for extra in "" "--softcap 50" "--alibi" "--sinks" "--softcap 50 --alibi --sinks" "--causal" \
                 "--causal --softcap 50 --alibi --sinks" "--mask"; do
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode $mode $extra
    done
  done
}
# Rows for sweep: the scalar backward, B = 4, N = 4096; at D = 128 also causal and at 32 KB and 16 KB
# of shared memory. With FORWARD_BUILD set, the scalar forward first, once per head dim (that
# build's first round), for the backward's ratio to it.
scalar_backward_rows() {
  local d=$1 h=$2 round=$3 build=$4
  [ "$round" = 1 ] && [ "$build" = "${FORWARD_BUILD:-}" ] && run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode fwd
  run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode bwd
  if [ "$d" = 128 ]; then
    run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode bwd --causal
    VKFLASH_MAX_SHARED_BYTES=32768 run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode bwd
    VKFLASH_MAX_SHARED_BYTES=16384 run --kernel scalar --b 4 --h "$h" --n 4096 --d "$d" --mode bwd
  fi
}
# Issue 21's goal: B = 1, Hq = 32, Hkv = 8, Nq = 1, D = 128 at 16k, 32k and 128k keys, with the read probe.
issue21_goal_rows() {
  local nk
  for nk in 16384 32768 131072; do
    run --b 1 --h 32 --hkv 8 --nq 1 --nk $nk --d 128 --mode fwd --read-ceiling
  done
}
# Beside the goal: D = 64 at 16k and 128k keys, B = 4 at 16k, and 8 packed rows (Nq = 2) at 16k.
decode_neighbour_rows() {
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 64 --mode fwd --read-ceiling
  run --b 4 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --read-ceiling
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --read-ceiling
}
# Both of the above, for sweep.
decode_goal_and_neighbour_rows() {
  issue21_goal_rows
  decode_neighbour_rows
}
# decode_goal_statistics BUILD...: statistics of each build's decode kernels at the goal shape (16k keys).
decode_goal_statistics() {
  local v
  for v in "$@"; do
    echo "== $v"
    statistics "$v" decode 128 fwd --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 | grep decode
  done
}
decode_rows() {
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 128 --mode fwd
  run --b 4 --h 32 --hkv 8 --nq 16 --nk 8192 --d 128 --mode fwd
}

# statistics BUILD KERNEL D MODE [ARGS...]: the driver's register count, code size, local and shared
# memory (VKFLASH_PIPELINE_STATISTICS=1) of every kernel `build-lab/BUILD/vkflash bench --kernel
# KERNEL` compiles for head dim D and --mode MODE, one run, with the shape ARGS (B = 1, H = 2, N =
# 1024 where none are given).
statistics() {
  local shape=("${@:5}")
  [ ${#shape[@]} -gt 0 ] || shape=(--b 1 --h 2 --n 1024)
  VKFLASH_PIPELINE_STATISTICS=1 "build-lab/$1/vkflash" bench --no-naive --runs 1 --warmup 1 --min-time-ms 0 \
    --kernel "$2" --d "$3" --mode "$4" "${shape[@]}" 2>&1 |
    grep -oE "\w+ \[[0-9,]+\]: .*" |
    sed -E 's/ \[[0-9,]+\]//; s/Stack Size=[0-9]+ //'
}

# link_cli: the CLI of $build where the [cli] cases run it, the build tree's build-gpu/vkflash
# (under the root that gpu_env.sh links), which the carried tree lacks. Where trixie's loader is
# unpacked, a script that runs the CLI under it, as trixie_run (tools/lab/gpu_env.sh) runs the test
# binary (a script: trixie_run itself does not reach the CLI through system()'s /bin/sh): under
# bookworm's loader with trixie's layer (VK_LAYER_PATH, inherited from the test) the layer warns
# about a call vkflash never makes, which fails the cases that check stderr (docs/tuning-log.md,
# 2026-11-28, "the test suite on the H200 with each family forced").
link_cli() {
  mkdir -p build-gpu
  rm -f build-gpu/vkflash
  if [ -n "${trixie_layers:-}" ]; then
    printf '#!/bin/sh\nVK_LAYER_PATH="%s" exec "%s" --library-path "%s" "%s" "$@"\n' \
      "$trixie_layers" "$trixie_ld" "$trixie_library_path" "$PWD/$build/vkflash" > build-gpu/vkflash
    chmod +x build-gpu/vkflash
  else
    ln -sfn "../$build/vkflash" build-gpu/vkflash
  fi
}

# catch_tests NAME SPEC [VAR=value...]: the Catch2 tests SPEC (a quoted test spec, as for the
# shell) of $build under trixie's validation layer, the kernels `auto` picks unless a
# VKFLASH_KERNELS=... follows, into $out/NAME.log; stopped after $TEST_TIMEOUT seconds (420).
catch_tests() {
  local name=$1 spec=$2
  shift 2
  env VKFLASH_KERNELS=auto "$@" timeout "${TEST_TIMEOUT:-420}" bash -c "trixie_run $build/tests/vkflash_tests -d yes $spec" \
    > "$out/$name.log" 2>&1
}

# family_tests NAME_FORMAT SPEC FAMILY...: catch_tests with each kernel family forced
# (VKFLASH_KERNELS=FAMILY) at once, each into the log printf NAME_FORMAT FAMILY names, stopped after
# $TEST_TIMEOUT seconds (300); then their report.
family_tests() {
  local format=$1 spec=$2 family names=()
  shift 2
  for family in "$@"; do
    names+=("$(printf "$format" "$family")")
    TEST_TIMEOUT=${TEST_TIMEOUT:-300} catch_tests "${names[-1]}" "$spec" VKFLASH_KERNELS=$family &
  done
  wait
  report "${names[@]}"
}

# scalar_tests PREFIX SPEC: catch_tests with the scalar family forced, with and without subgroup
# operations, at once, into the logs PREFIXscalar and PREFIXscalar-nosubgroup; then their report.
scalar_tests() {
  catch_tests "${1}scalar" "$2" VKFLASH_KERNELS=scalar &
  catch_tests "${1}scalar-nosubgroup" "$2" VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 &
  wait
  report "${1}scalar" "${1}scalar-nosubgroup"
}

# report NAME...: each log's test times and verdict.
report() {
  local name
  for name in "$@"; do
    echo "== $name"
    # A log without a test's line (the binary missing, a crash before Catch2 printed) shows its end.
    if grep -aqE "^[0-9.]+ s: |passed|failed|FAILED" "$out/$name.log"; then
      grep -aE "^[0-9.]+ s: |passed|failed|FAILED" -A3 "$out/$name.log" | head -40
    else
      echo "no test ran; the log ends:"
      tail -3 "$out/$name.log"
    fi
  done
}

# sass BUILD ARGS...: the machine code of every kernel `build-lab/BUILD/vkflash bench ARGS` compiles
# (two short runs), from the driver's shader cache pointed at an empty folder, into $out/sass_BUILD
# (tools/lab/dump_sass.py --all, and $SASS_DUMP_ARGS, e.g. --hex; zstd from bookworm's .debs in .gpu/zstd/).
sass() {
  local build_name=$1
  shift
  if [ ! -x /tmp/zstdw ]; then
    mkdir -p /tmp/zstd && for f in .gpu/zstd/*.deb; do dpkg -x "$f" /tmp/zstd; done
    printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/zstd/usr/lib/x86_64-linux-gnu exec /tmp/zstd/usr/bin/zstd "$@"\n' > /tmp/zstdw
    chmod +x /tmp/zstdw
  fi
  rm -rf /tmp/glcache && mkdir -p /tmp/glcache
  __GL_SHADER_DISK_CACHE_PATH=/tmp/glcache __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 "build-lab/$build_name/vkflash" bench \
    --no-naive --runs 2 --warmup 1 --warmup-ms 0 --min-time-ms 0 "$@" > /dev/null 2>&1
  python3 tools/lab/dump_sass.py /tmp/glcache "$out/sass_$build_name" --all --zstd /tmp/zstdw ${SASS_DUMP_ARGS:-}
}

# pack_sass BUILD...: each $out/sass_BUILD folder that sass wrote as one $out/sass_BUILD.tgz, the
# folder removed: a device run returns at most 8 files, and a forward and backward dump hold more.
pack_sass() {
  local name
  for name in "$@"; do
    tar -C "$out" -czf "$out/sass_$name.tgz" "sass_$name" && rm -rf "${out:?}/sass_$name"
  done
}
