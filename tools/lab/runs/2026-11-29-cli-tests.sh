#!/usr/bin/env bash
# 2026-11-29: the CLI's checks on the GPU with the families forced (2026-11-28 ran the [cli] cases
# with `auto` only). docs/tuning-log.md, "the CLI's checks on the H200 with the families forced".
# Needs build-lab/new: the build to test (cef3996 in the logged run), its vkflash, the test binary
# and CMakeCache.txt. link_cli puts a script at the build tree's CLI path, where the [cli] cases
# run the CLI, that runs it under trixie's loader.
# Parts:
#   cases       the [cli] cases under trixie's validation layer with `auto` and with scalar,
#               coopmat_khr and coopmat_nv forced, one process after another: each case keeps its
#               files in a folder named after it under the working directory, so two processes
#               running the same case at once would overwrite each other's files;
#   crosscheck  tests/cli_numpy_crosscheck.py (an independent NumPy float64 check of the CLI's .npy
#               outputs) with `auto` and with each family forced, coopmat2 too.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-cli-tests.sh cases|crosscheck`.
part=${1:-cases}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, catch_tests, report, link_cli
link_cli
families="auto scalar coopmat_khr coopmat_nv"
case "$part" in
  cases)
    for family in $families; do
      TEST_TIMEOUT=${TEST_TIMEOUT:-300} catch_tests "cli-$family" '"[cli]"' VKFLASH_KERNELS=$family
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
