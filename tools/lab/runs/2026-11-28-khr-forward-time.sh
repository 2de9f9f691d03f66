#!/usr/bin/env bash
# 2026-11-28 (sixth session), issue 22: where the KHR forward's time goes (71 / 86 TFLOP/s at D = 128
# / 64 on the H200 after the row-block scratch; 100 wanted). Timing-only ablations of
# shaders/coopmat/attention_forward_coopmat.comp made by tools/lab/build_variant.py (their O is
# wrong): build-lab/noexp (P = S - reference, no exp2), norescale (O not rescaled by alpha), nopv
# (no P V product: one element of P added to O instead), onekload (every K fragment of a step read
# from the tile's first 16 keys: 8 distinct loads instead of 32), onevload (the same for V),
# noload (K and V staged from constants, no global loads). build-lab/new: HEAD (9f0c462).
# First run (`first`): the ablations, forward tiles, statistics and machine code. The machine code
# keeps O's 64 accumulator floats per lane in 256 bytes of local memory (82 local stores and 34
# local loads per key tile). Second run (`local`): which use of O puts it there, timing-only
# variants: tmpscale (the rescale and the epilogue's scale on a copy of one accumulator, written
# back whole), matscale (KHR: the rescale as a component-wise product with a matrix of alphas),
# nofix (the non-finite V fix-up removed), noepi (the epilogue's scale removed), tmpnofix
# (tmpscale and nofix), norescale (from the first run).
# None of these removed the local memory. Third run (`local2`): noelem (no element access to O
# at all: no rescale, no epilogue scale, no fix-up), matall (KHR: the rescale, the epilogue's scale
# and the fix-up as whole-matrix operations on O, the elements written on a fresh matrix).
# Neither moved it either: it is the register allocation's (254-255 registers). Fourth run
# (`kept`): the rescale skipped where no row of a subgroup moves its reference, the reference's
# depth kept from tile to tile while the max stands and the tile's top lies at most 2^8 above it
# (common/score_mod.glsl's reference_depth_kept). build-lab/base: HEAD (9f0c462); new: the change;
# keep14: a headroom of 2^14; novote: the kept depths, O always rescaled. Then the tests with
# each extension forced.
# Fifth run (`coord`): build-lab/coordreload, the coordinate matrix loaded again from shared memory
# in each step and after the loop instead of held in registers through the pass (8 fewer live
# registers in the loop), against build-lab/base.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-khr-forward-time.sh first|local|local2|kept|coord`.
part=${1:-first}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

khr_forward() { run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; }
# Both subgroup-scope extensions' forwards.
family_forward() {
  local k
  for k in coopmat_khr coopmat_nv; do echo "-- $k"; run --kernel $k --b 4 --h "$2" --n 4096 --d "$1" --mode fwd; done
}
# khr_statistics BUILD...: the KHR forward's statistics per build at D = 64 and 128.
khr_statistics() {
  local v d
  for v in "$@"; do
    for d in 64 128; do
      echo "== $v D=$d statistics"
      statistics "$v" coopmat_khr "$d" fwd
    done
  done
}

case "$part" in
  first)
    sweep 1 "128 64" "new noexp norescale nopv onekload onevload noload" khr_forward
    cli=build-lab/new/vkflash
    for tile in 4x1x64 8x1x64 4x2x64 4x2x32 2x2x64 4x2x48 8x1x32 4x1x32; do
      echo "== tile $tile D=128"
      VKFLASH_COOPMAT_FORWARD_TILE=$tile run --kernel coopmat_khr --b 4 --h 16 --n 4096 --d 128 --mode fwd
    done
    khr_statistics new
    sass new --kernel coopmat_khr --b 1 --h 2 --n 1024 --d 128 --mode fwd
    ;;
  local)
    khr_statistics new norescale tmpscale matscale nofix noepi tmpnofix
    sweep 1 "128 64" "new norescale tmpscale matscale nofix noepi tmpnofix" khr_forward
    ;;
  local2)
    khr_statistics new noelem matall
    sweep 1 "128 64" "new norescale matscale noelem matall" khr_forward
    sass matall --kernel coopmat_khr --b 1 --h 2 --n 1024 --d 128 --mode fwd
    ;;
  kept)
    family_forward_causal() {
      family_forward "$@"
      echo "-- coopmat_khr causal"
      run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
    }
    sweep 2 "128 64" "base new keep14 novote" family_forward_causal
    build=build-lab/new
    spec='"forward matches the float64*","forward with a custom*","forward with large*","causal rows*","forward results are bit*","LSE is optional*","layouts: *","varlen: *","KV lengths*","[nonfinite]","sliding windows: *","softcap: *","masks: forward*","masks: keys far*","[sinks]","[alibi]"'
    family_tests kept-%s "$spec" coopmat_khr coopmat_nv
    ;;
  coord)
    sweep 2 "128 64" "base coordreload" family_forward
    ;;
esac
