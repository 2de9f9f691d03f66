#!/usr/bin/env bash
# 2026-11-28 (seventh session): the whole Catch2 suite on the GPU under trixie's validation layer,
# once with the kernels auto-chosen and once with each family forced (VKFLASH_KERNELS), and with
# the scalar family without subgroup operations, all at once (each stopped after $TEST_TIMEOUT s).
# build-lab/new: the build to test (its CLI is linked where the [cli] tests look for it).
# Second run (`rest`): the chunked-pass tests with the auto, scalar and scalar-without-subgroup
# kernels, and the test cases the first run's timeout left out, from the lists in build-lab/lists
# (FAMILY-NN.txt, one test name a line, run with Catch2's -f: auto, coopmat2, coopmat_khr,
# coopmat_nv; scalar and scalarnosub all but the CLI's), each list a process of its own.
# Third run (`cli-masks`): the [cli] tests with the CLI under trixie's loader too (the first runs
# started it under bookworm's loader with trixie's layer, which warned about the loader's calls),
# and "masks: loops of more than 1024 tiles ..." with the closed keys aligned to each kernel's
# tiles, with the auto, KHR and NV kernels.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-family-tests.sh first|rest|cli-masks`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, catch_tests, report
build=build-lab/new
mkdir -p build-gpu && ln -sfn "$PWD/build-lab/new/vkflash" build-gpu/vkflash  # VKFLASH_CLI_PATH
export TEST_TIMEOUT=${TEST_TIMEOUT:-480}
# summary LOG: the counts, and each failed test case's name and first lines of its failures.
summary() {
  grep -E "^(test cases|assertions):" "$1"
  grep -B1 -A8 "FAILED:" "$1" | grep -vE "^\.\.\.|^$|^  [{ 0-9-]" | cut -c1-160 | head -30
}
if [ "${1:-first}" = cli-masks ]; then
  rm -f build-gpu/vkflash
  printf '#!/bin/sh\nexec /tmp/trixie-root/usr/lib64/ld-linux-x86-64.so.2 --library-path /tmp/trixie-root/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu "%s" "$@"\n' \
    "$PWD/build-lab/new/vkflash" > build-gpu/vkflash
  chmod +x build-gpu/vkflash
  catch_tests cli '"[cli]"' &
  spec='"masks: loops of more than 1024*"'
  for family in auto coopmat_khr coopmat_nv; do catch_tests "masks-$family" "$spec" VKFLASH_KERNELS=$family & done
  wait
  for log in "$out"/cli.log "$out"/masks-*.log; do
    echo "== $(basename "$log" .log): $(grep -cE '^[0-9.]+ s: ' "$log") timed"
    grep -E "All tests passed|closed" "$log" | sort | uniq -c
    summary "$log"
  done
  exit 0
fi
if [ "${1:-first}" = rest ]; then
  spec='"chunked passes*"'
  catch_tests chunked-auto "$spec" &
  catch_tests chunked-scalar "$spec" VKFLASH_KERNELS=scalar &
  catch_tests chunked-scalarnosub "$spec" VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 &
  for list in build-lab/lists/*.txt; do
    name=$(basename "$list" .txt)
    case $name in
      auto-*) catch_tests "rest-$name" "-f $list" & ;;
      scalarnosub-*) catch_tests "rest-$name" "-f $list" VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 & ;;
      *) catch_tests "rest-$name" "-f $list" VKFLASH_KERNELS="${name%-*}" & ;;
    esac
  done
  wait
  for log in "$out"/chunked-*.log "$out"/rest-*.log; do
    echo "== $(basename "$log" .log): $(grep -cE '^[0-9.]+ s: ' "$log") timed"
    summary "$log"
  done
  exit 0
fi
catch_tests suite-auto '' &
for family in scalar coopmat_khr coopmat_nv coopmat2; do
  catch_tests "suite-$family" '' VKFLASH_KERNELS=$family &
done
catch_tests suite-scalar-nosubgroup '' VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 &
wait
for name in auto scalar coopmat_khr coopmat_nv coopmat2 scalar-nosubgroup; do
  log=$out/suite-$name.log
  echo "== $name: $(grep -cE '^[0-9.]+ s: ' "$log") test cases timed; last: $(grep -E '^[0-9.]+ s: ' "$log" | tail -1)"
  grep -E "^(test cases|assertions):" "$log"
  grep -B2 -A12 "FAILED:" "$log" | grep -vE "^\.\.\.|^$" | head -60
done
