#!/usr/bin/env bash
# 2026-11-28 (seventh session), issue 22: the KHR forward's subgroups in pairs that split O's columns,
# so that each holds half of O's accumulators (the driver keeps them in local memory at 254
# registers). Timing-only builds of coopmat/attention_forward_coopmat.comp (tools/lab/build_variant.py
# @FILE), each computing only the first half of a workgroup's rows (time x 2 for the whole):
# build-lab/splitd: both subgroups of a pair compute the whole S and P of their 16 rows, each the P V
# product for half of O's columns; build-lab/pairx: each computes S and P for half of the tile's keys,
# the pair exchanges row maxima and P through shared memory (P over the K tile's place), each then
# multiplies all of P by half of V's columns. build-lab/new: HEAD 8149dae with the chunked-pass
# test's fix. Then (`tests`) the chunked-pass test with the scalar family forced, with subgroup
# operations disabled under auto, and with auto.
# Second run (`order`): build-lab/kbouter, S's products with the head dim's blocks outer and the key
# blocks inner (consecutive products into different accumulators), against build-lab/new, also on
# the NV kernels; and 16-subgroup tiles (512 invocations: at most 128 registers each) on both.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-khr-pairs.sh first|order|tests`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows
khr_forward() {
  local keys=$(( $1 == 64 ? 128 : 64 ))
  echo "-- 4x1x$keys"; VKFLASH_COOPMAT_FORWARD_TILE=4x1x$keys run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  echo "-- 8x1x$keys"; VKFLASH_COOPMAT_FORWARD_TILE=8x1x$keys run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
}
khr_order() {
  local keys=$(( $1 == 64 ? 128 : 64 )) k t
  for k in coopmat_khr coopmat_nv; do
    for t in 4x1x$keys 8x1x$keys 16x1x$keys 16x1x32; do
      echo "-- $k $t"; VKFLASH_COOPMAT_FORWARD_TILE=$t run --kernel $k --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
    done
  done
}
case "${1:-first}" in
  first)
    for v in new splitd pairx; do echo "== statistics $v"; statistics $v coopmat_khr 128 fwd; statistics $v coopmat_khr 64 fwd; done
    sweep 2 "128 64" "new splitd pairx" khr_forward
    ;;
  order)
    for v in new kbouter; do echo "== statistics $v"; statistics $v coopmat_khr 128 fwd; statistics $v coopmat_khr 64 fwd; done
    sweep 2 "128 64" "new kbouter" khr_order
    ;;
  tests)
    build=build-lab/new
    spec='"chunked passes carry*"'
    TEST_TIMEOUT=150 catch_tests chunked-scalar "$spec" VKFLASH_KERNELS=scalar &
    TEST_TIMEOUT=150 catch_tests chunked-nosubgroup "$spec" VKFLASH_DISABLE_SUBGROUP_OPS=1 &
    TEST_TIMEOUT=150 catch_tests chunked-auto "$spec" &
    wait
    report chunked-scalar chunked-nosubgroup chunked-auto
    grep -h "chunked:" "$out"/chunked-*.log | sort | uniq -c
    ;;
  *) echo "usage: $0 first|order|tests" >&2; exit 2 ;;
esac
