#!/usr/bin/env bash
# 2026-11-29 (seventeenth session): the float16 storage allowance (docs/design.md, "Accuracy") on
# the H200, with the fuzz's large draws per family, and the scalar tiles of 56d179c for head dims
# whose row words only one invocation divides, timed for the first time on a GPU. Build:
# build-lab/new (the working tree; its tests binary beside it).
# `tiles`: scalar forward and backward at float16 D = 40 and 72 (B = 4, H = 32, N = 2048), the
# default tiles against the old 4x4x1x1 forced, and D = 64 / 128 at the table's shape for reference;
# `fuzz`: the [fuzz] case with VKFLASH_FUZZ_LARGE=1 per family, each in its own process, beside
# the allowance's own case with each family forced; `pv`: build-lab/pvone (the scalar forward's P V
# as one call whose per-row key limits apply where the tile needs them, instead of a masked and an
# unmasked copy: the ~150 register moves where the copies join, 2026-11-29 "the scalar forward's
# machine code") against new, D = 64 and 128, plain and causal, two rounds. The variant:
#   python3 tools/lab/build_variant.py pvone shaders/scalar/attention_forward_tiled.comp \
#     "<the if (masked_tile) { add_pv(.., true, ..) } else { add_pv(.., false, ..) } block>" \
#     "    add_pv(acc, pv_in_float16, tile_scale, masked_tile, visible_first, visible_end);"
# Second run, `dbias`: 06c7823's build (the dbias kernel's walk as one loop of tile steps, chunked
# where a driver has a loop budget): the mask tests with each family forced, the long-sequence
# cases (the new dbias case's budget of 4000 chunks it on the GPU too), the fuzz's CI draw and
# large draws.
# Third run, `masks2`: the block-sparse mask cases whose NaN keys are now whole tiles of the
# kernels that run (`dbias` found them failing with coopmat_nv forced: its 48-key forward tile at D
# <= 64 straddled key 128), and the dbias cases split in two (the bit-for-bit one tagged [knobs]),
# with each family forced; the CLI's mask case through link_cli.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-float16-allowance.sh tiles pv fuzz`,
# then `... dbias`, then `... masks2`, then `... suite`: the whole Catch2 suite with the kernels auto
# picks (coopmat2 here), from ten lists of test names (build-lab/lists/auto-NN.txt: `vkflash_tests
# --list-test-names-only "~[cli]"` dealt round-robin) in parallel processes, and the [cli] cases
# through link_cli. Catch2 2.13's -f does not keep a name's commas (it reads them as separators):
# that run ran only the 62 names without one. `suite2` (the fifth run) ran the others, each as the
# part of its name before the first comma and a `*`, dealt into twelve lists the same way.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report

# fuzz NAME FAMILY SEED CASES: the large draws of the [fuzz] case with VKFLASH_KERNELS=FAMILY.
fuzz() {
  build=build-lab/new catch_tests "$1" '"[fuzz]"' VKFLASH_KERNELS=$2 VKFLASH_FUZZ_SEED=$3 VKFLASH_FUZZ_CASES=$4 \
    VKFLASH_FUZZ_LARGE=1
}
# fuzz_report NAME...: per log, the cases started, the verdict, what failed (seed and shape lines).
fuzz_report() {
  local name
  for name in "$@"; do
    echo "== $name: $(grep -ac "^VKFLASH_FUZZ_SEED=" "$out/$name.log") cases started"
    grep -aE "^variant fuzz|passed|failed" "$out/$name.log" | head -3
    grep -aE "FAILED" -A8 "$out/$name.log" | grep -aE "<=|SEED|signal" | head -8
  done
}

# scalar_tile_rows D H: forward and backward, the default tiles and 4x4x1x1 forced.
scalar_tile_rows() {
  local mode
  for mode in fwd bwd; do
    echo "-- D=$1 $mode default"
    run --kernel scalar --b 4 --h "$2" --n 2048 --d "$1" --mode $mode
    echo "-- D=$1 $mode 4x4x1x1"
    VKFLASH_SCALAR_FORWARD_TILE=4x4x1x1 VKFLASH_SCALAR_BACKWARD_TILE=4x4x1x1,4x4x1x1 \
      run --kernel scalar --b 4 --h "$2" --n 2048 --d "$1" --mode $mode
  done
}

scalar_forward_rows() {
  run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
}

for part in "$@"; do
  case $part in
    tiles)
      cli=build-lab/new/vkflash
      RUNS=10
      for d in 40 72; do scalar_tile_rows $d 32; done
      RUNS=20
      for d in 64 128; do
        echo "-- D=$d table shape"
        run --kernel scalar --b 4 --h $((2048 / d)) --n 4096 --d $d --mode fwd
        run --kernel scalar --b 4 --h $((2048 / d)) --n 4096 --d $d --mode bwd
      done
      ;;
    pv)
      sweep 2 "64 128" "new pvone" scalar_forward_rows
      ;;
    fuzz)
      export TEST_TIMEOUT=420
      fuzz fuzz-auto-a auto 600000 120 &
      fuzz fuzz-auto-b auto 610000 120 &
      fuzz fuzz-scalar scalar 620000 200 &
      fuzz fuzz-scalar-b scalar 630000 150 &
      fuzz fuzz-khr coopmat_khr 640000 200 &
      fuzz fuzz-nv coopmat_nv 650000 200 &
      wait
      TEST_TIMEOUT=120 family_tests "allowance-%s" '"sinks: outputs below*"' auto scalar coopmat_khr coopmat_nv
      fuzz_report fuzz-auto-a fuzz-auto-b fuzz-scalar fuzz-scalar-b fuzz-khr fuzz-nv
      tar -C "$out" -czf "$out/fuzz-logs.tgz" $(cd "$out" && ls fuzz-*.log allowance-*.log) && rm -f "$out"/fuzz-*.log "$out"/allowance-*.log
      ;;
    dbias)
      export TEST_TIMEOUT=400 build=build-lab/new
      family_tests "mask-%s" '"[mask]"' auto scalar coopmat_khr coopmat_nv &
      catch_tests long '"[long]"' &
      catch_tests fuzz-ci '"[fuzz]"' &
      fuzz fuzz-dbias-auto auto 700000 100 &
      fuzz fuzz-dbias-scalar scalar 710000 150 &
      wait
      report long fuzz-ci
      fuzz_report fuzz-dbias-auto fuzz-dbias-scalar
      tar -C "$out" -czf "$out/dbias-logs.tgz" $(cd "$out" && ls mask-*.log long.log fuzz-*.log) &&
        rm -f "$out"/mask-*.log "$out"/long.log "$out"/fuzz-*.log
      ;;
    masks2)
      export TEST_TIMEOUT=400 build=build-lab/new
      spec='"masks: tiles the mask closes*","masks: with deterministic = false*","masks: the decode kernels'"'"' closed*","the bias'"'"'s gradient is right*"'
      family_tests "masks2-%s" "$spec" auto scalar coopmat_khr coopmat_nv
      link_cli
      catch_tests masks2-cli '"CLI --mask and --dbias*"'
      report masks2-cli
      ;;
    suite | suite2)
      export TEST_TIMEOUT=500 build=build-lab/new
      [ "$part" = suite2 ] && TEST_TIMEOUT=270
      link_cli
      names=()
      for list in build-lab/lists/auto-*.txt; do
        names+=("suite-$(basename "$list" .txt)")
        catch_tests "${names[-1]}" "-f $list" &
      done
      [ "$part" = suite ] && catch_tests suite-cli '"[cli]"' &
      wait
      [ "$part" = suite ] && names+=(suite-cli)
      for name in "${names[@]}"; do
        echo "== $name: $(grep -caE '^[0-9.]+ s: ' "$out/$name.log") timed"
        grep -aE "All tests passed|test cases:|assertions:" "$out/$name.log" | tail -2
        grep -aE "FAILED" -B6 -A6 "$out/$name.log" | grep -aE "<=|==|FAILED|due to|SIG" | head -6
      done
      tar -C "$out" -czf "$out/suite-logs.tgz" $(cd "$out" && ls suite-*.log) && rm -f "$out"/suite-*.log
      ;;
    *) echo unknown part; exit 2 ;;
  esac
done
