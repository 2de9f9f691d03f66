#!/usr/bin/env bash
# 2026-11-29: the CLI's checks on the GPU, which earlier GPU runs left out. The [cli] Catch2 cases
# run the CLI as a child process (build-gpu/vkflash, which link_cli now makes a script running it
# under trixie's loader), with the kernels `auto` picks and with each family forced, one process
# after the other: each case keeps its files in a folder named after it under the working
# directory, so two processes running the same case at once overwrite each other's files (the
# first run of this script ran the families at once, and its cases failed on each other's files).
# Part `crosscheck`: tests/cli_numpy_crosscheck.py (an independent NumPy float64 check of the
# CLI's .npy outputs) with each family forced. Needs build-lab/new (its vkflash, the test binary
# and CMakeCache.txt). Carry [".gpu", ".gl", "build-lab"];
# `bash tools/lab/runs/2026-11-29-cli-tests.sh cases|crosscheck`.
part=${1:-cases}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, catch_tests, report, link_cli
link_cli
families="auto scalar coopmat_khr coopmat_nv"
case "$part" in
  cases)
    for family in $families; do
      TEST_TIMEOUT=${TEST_TIMEOUT:-300} catch_tests "cli-$family" "[cli]" VKFLASH_KERNELS=$family
      report "cli-$family"
    done
    ;;
  crosscheck)
    for family in $families coopmat2; do
      echo "== cli_numpy_crosscheck.py, $family"
      VKFLASH_KERNELS=$family timeout 300 python3 tests/cli_numpy_crosscheck.py build-gpu/vkflash > "$out/crosscheck-$family.log" 2>&1
      echo "exit $?"
      tail -1 "$out/crosscheck-$family.log"
    done
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
