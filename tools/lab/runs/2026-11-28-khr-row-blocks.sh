#!/usr/bin/env bash
# 2026-11-28 (fifth session), issue 22: the subgroup-scope kernels' row blocks (Q and dO in, O, dQ,
# dK and dV out) through a 16x16 scratch per subgroup, one way for full and partial blocks, where a
# matrix load or store straight from memory sat beside an element-by-element path for blocks past
# the last row. The first run (tools/lab/runs/2026-11-28-khr-local-memory.sh) found that removing
# the element-by-element path (timing-only: wrong for partial blocks) ran the KHR backward 1.5x
# faster. build-lab/new: the change; build-lab/base: 842bd77; build-lab/full: 842bd77 with the
# element-by-element paths removed (that first run's fwd_full, the bound).
# Second run: the forward's Q load and O store each either through the scratch or as before (a
# matrix load / store from memory beside the element-by-element path), because the first run's
# forward at D = 64 ran slower through the scratch: build-lab/fwd_qbranch (Q as before),
# fwd_obranch (O as before), fwd_bothbranch (both as before), made by tools/lab/build_variant.py
# with "@FILE": the change's forward with 842bd77's two macros pasted in as *_BRANCH.
# Third run, the change as committed: the forward takes the scratch from head dim 80 and the
# direct way up to 64 (the second run's best per head dim); build-lab/new against build-lab/base
# (`confirm`), then the tests with each extension forced (`tests`).
# Fourth run (`tables`): the gradient kernels' tile tables again, since they were measured with
# the element-by-element row blocks; variants of the change's coopmat_backend.cc by
# tools/lab/build_variant.py: build-lab/khr_dkdv64 (KHR dK/dV {4, 64, 64} first: 64 streamed rows
# at D <= 64), khr_dq64 (KHR dQ 64 streamed keys at every head dim), nv_dkdv32 (NV dK/dV without
# its {4, 64, 64} entry), nv_dq32 (NV dQ without its {4, 64} entry: 32 keys first).
# Fifth run: build-lab/new with the tables that won (KHR dK/dV 64 streamed rows at D <= 64, KHR dQ
# 64 streamed keys everywhere, NV dQ 32 at D <= 64): `confirm` against 842bd77 and `tests`.
# Sixth run (`small`): the KHR backward ran faster at 16 KB (its 16x16 tiles, one subgroup) than at
# 32 KB in the first run; build-lab/khr_small: both KHR gradient tables with {1, 16} first.
# Seventh run (`small-split`): which of the two kernels gains at 32 KB: build-lab/small_dkdv and
# small_dq, each with only its own table's {1, 16} first.
# Eighth run (`final-tests`): build-lab/new as committed (the KHR dK/dV table's {1, 16} before
# {2, 32}; the backward kernels' unused float16 buffer views deleted): the backward references,
# layouts and varlen with each extension forced, and KHR at 32 KB.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-khr-row-blocks.sh stats|bench|forward|confirm|tests|tables|small|small-split|final-tests`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

# family_rows D H: both subgroup-scope extensions at B = 4, N = 4096, --mode $MODE (both unless set).
family_rows() {
  local k
  for k in coopmat_khr coopmat_nv; do
    echo "-- $k"
    run --kernel $k --b 4 --h "$2" --n 4096 --d "$1" --mode "${MODE:-both}"
  done
}

case "$part" in
  stats)
    for v in base new full; do
      for k in coopmat_khr coopmat_nv; do
        for d in 64 128; do
          echo "== $v $k D=$d"
          statistics "$v" "$k" "$d" both
        done
      done
    done
    ;;
  bench)
    sweep 2 "128 64" "base new full" family_rows
    for limit in 32768 16384; do
      for k in coopmat_khr coopmat_nv; do
        for v in base new; do
          cli=build-lab/$v/vkflash
          echo "== $v $k D=128 limit $limit"
          VKFLASH_MAX_SHARED_BYTES=$limit run --kernel $k --b 4 --h 16 --n 4096 --d 128 --mode both
        done
      done
    done
    for v in base new; do
      cli=build-lab/$v/vkflash
      echo "== $v short rows (B = 16, N = 1024, D = 128)"
      run --kernel coopmat_khr --b 16 --h 16 --n 1024 --d 128 --mode both
    done
    ;;
  forward)
    MODE=fwd sweep 2 "64 128" "base new fwd_qbranch fwd_obranch fwd_bothbranch" family_rows
    ;;
  confirm)
    sweep 1 "128 64" "base new" family_rows
    ;;
  tables)
    MODE=bwd sweep 2 "64 128" "new khr_dkdv64 khr_dq64 nv_dkdv32 nv_dq32" family_rows
    ;;
  small)
    for d in 128 64; do
      for limit in 49152 32768; do
        for v in new khr_small; do
          cli=build-lab/$v/vkflash
          echo "== $v D=$d limit $limit"
          VKFLASH_MAX_SHARED_BYTES=$limit run --kernel coopmat_khr --b 4 --h $((2048 / d)) --n 4096 --d $d --mode bwd
        done
      done
    done
    ;;
  small-split)
    for round in 1 2; do
      for v in new small_dkdv small_dq khr_small; do
        cli=build-lab/$v/vkflash
        echo "== $v D=128 limit 32768 round $round"
        VKFLASH_MAX_SHARED_BYTES=32768 run --kernel coopmat_khr --b 4 --h 16 --n 4096 --d 128 --mode bwd
      done
    done
    ;;
  final-tests)
    build=build-lab/new
    spec='"backward matches the float64*","layouts: *","varlen: *"'
    for k in coopmat_khr coopmat_nv; do
      TEST_TIMEOUT=${TEST_TIMEOUT:-150} catch_tests "final-$k" "$spec" VKFLASH_KERNELS=$k &
    done
    TEST_TIMEOUT=${TEST_TIMEOUT:-150} catch_tests final-khr-32768 "$spec" VKFLASH_KERNELS=coopmat_khr VKFLASH_MAX_SHARED_BYTES=32768 &
    wait
    report final-coopmat_khr final-coopmat_nv final-khr-32768
    ;;
  tests)
    build=build-lab/new
    spec='"forward matches the float64*","forward with a custom*","forward with large*","causal rows*","forward results are bit*","LSE is optional*","layouts: *","varlen: *","KV lengths*","[nonfinite]","backward matches the float64*","sliding windows: backward*","softcap: *","masks: forward*","masks: backward*","cooperative-matrix*"'
    for k in coopmat_khr coopmat_nv; do
      TEST_TIMEOUT=${TEST_TIMEOUT:-420} catch_tests "$k" "$spec" VKFLASH_KERNELS=$k &
    done
    small='"forward matches the float64*","backward matches the float64*","causal rows*","layouts: *","varlen: *"'
    TEST_TIMEOUT=${TEST_TIMEOUT:-420} catch_tests khr-16384 "$small" VKFLASH_KERNELS=coopmat_khr VKFLASH_MAX_SHARED_BYTES=16384 &
    wait
    report coopmat_khr coopmat_nv khr-16384
    ;;
esac
