#!/usr/bin/env bash
# 2026-11-28 (seventh session): the whole Catch2 suite on the GPU under trixie's validation layer,
# once with the kernels auto-chosen and once with each family forced (VKFLASH_KERNELS), and with
# the scalar family without subgroup operations, all at once (each stopped after $TEST_TIMEOUT s).
# build-lab/new: the build to test (its CLI is linked where the [cli] tests look for it).
# Second run (`rest`): the chunked-pass tests with the auto, scalar and scalar-without-subgroup
# kernels, and the test cases the first run's timeout left out, from the lists in build-lab/lists
# (FAMILY-NN.txt, one test name a line, run with Catch2's -f: auto, coopmat2, coopmat_khr,
# coopmat_nv; scalar and scalarnosub all but the CLI's), each list a process of its own. The lists
# were made on the dev machine: `vkflash_tests --list-test-names-only`, less the names the first
# run's logs time ("N s: NAME" lines), cut with `split -l` (the families' lists without the CLI,
# .npy, ContextOptions and OutputFiles cases).
# Third run (`cli-masks`): the [cli] tests with the CLI under trixie's loader too (the first runs
# started it under bookworm's loader with trixie's layer, which warned about the loader's calls),
# and "masks: loops of more than 1024 tiles ..." with the closed keys aligned to each kernel's
# tiles, with the auto, KHR and NV kernels.
# Fourth run (`recheck`): after the review, the two chunked-pass tests (auto, scalar, scalar without
# subgroup operations) and the masks test sized from the kernels' tiles (auto and every family).
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-family-tests.sh first|rest|cli-masks|recheck`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, catch_tests, report
build=build-lab/new
mkdir -p build-gpu && ln -sfn "$PWD/$build/vkflash" build-gpu/vkflash  # VKFLASH_CLI_PATH
export TEST_TIMEOUT=${TEST_TIMEOUT:-480}
# summary LOG: the counts, and each failed test case's name and first lines of its failures.
summary() {
  grep -E "^(test cases|assertions):" "$1"
  grep -B1 -A8 "FAILED:" "$1" | grep -vE "^\.\.\.|^$|^  [{ 0-9-]" | cut -c1-160 | head -30
}
mode=${1:-first}
case $mode in first | rest | cli-masks | recheck) ;; *) echo "usage: $0 first|rest|cli-masks|recheck" >&2; exit 2 ;; esac
if [ "$mode" = recheck ]; then
  spec='"chunked passes*"'
  catch_tests recheck-chunked-auto "$spec" &
  catch_tests recheck-chunked-scalar "$spec" VKFLASH_KERNELS=scalar &
  catch_tests recheck-chunked-scalarnosub "$spec" VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 &
  spec='"masks: loops of more than 1024*"'
  for family in auto scalar coopmat2 coopmat_khr coopmat_nv; do
    catch_tests "recheck-masks-$family" "$spec" VKFLASH_KERNELS=$family &
  done
  wait
  for log in "$out"/recheck-*.log; do
    echo "== $(basename "$log" .log): $(grep -E '^[0-9.]+ s: ' "$log" | tr '\n' ' ')"
    grep -E "All tests passed" "$log"
    summary "$log"
  done
  exit 0
fi
if [ "$mode" = cli-masks ]; then
  rm -f build-gpu/vkflash
  printf '#!/bin/sh\nexec /tmp/trixie-root/usr/lib64/ld-linux-x86-64.so.2 --library-path /tmp/trixie-root/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu "%s" "$@"\n' \
    "$PWD/$build/vkflash" > build-gpu/vkflash
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
if [ "$mode" = rest ]; then
  spec='"chunked passes*"'
  catch_tests chunked-auto "$spec" &
  catch_tests chunked-scalar "$spec" VKFLASH_KERNELS=scalar &
  catch_tests chunked-scalarnosub "$spec" VKFLASH_KERNELS=scalar VKFLASH_DISABLE_SUBGROUP_OPS=1 &
  for list in build-lab/lists/*.txt; do
    [ -e "$list" ] || { echo "no lists in build-lab/lists" >&2; exit 2; }
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
  summary "$log"
done
