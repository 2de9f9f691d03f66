#!/usr/bin/env bash
# 2026-11-28 (third session), the tensor-core decode kernel's closed tiles from the mask (issue 23).
# build-lab/new: the change (parts of at most 32 key tiles scan the mask's elements before the loop,
# no summary pass; DecodeReadsMaskSummary); build-lab/base: the same build with the tensor-core
# kernel always reading the summary (as before), made by
#   python3 tools/lab/build_variant.py cm2summary engine/attention/backends/decode_backend.cc \
#     "  return steps > 32 || uint64_t(term_rows) * split_keys > uint64_t(kMaskScanMaxPerInvocation) * choice.workgroup_size;" "  return true;"
# The first run had the scan one element a trip and its bound at 64 elements an invocation (the
# kernel's `for (uint i = tid; ...)` loop); the second read 8 elements a trip with the bound at 16
# (build-lab/cap64: the same at 64, made with build_variant.py from decode_backend.h). Kept: 8 a
# trip, the bound at 4 (kMaskScanMaxPerInvocation), chosen from those two runs.
# build-lab/mut_scan and build-lab/mut_summary: test binaries whose tensor-core decode kernel closes
# every tile on the scan's way (`if (open != 0) atomicOr(...)` -> `if (false) ...`) or on the
# summary's way (`if (closed)` -> `if (closed || (MASK != VKF_MASK_NONE && !scan_mask))`): the
# closed-steps test must fail with the many parts (8 asked for then; 32 now) and with 1 part respectively.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-decode-mask-scan.sh bench|mutations|tests|review-tests`.
part=${1:-bench}
RUNS=${RUNS:-50}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

tensor_core_rows() {
  local nq dtype
  for nq in 4 16; do
    run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd
    for dtype in f32 f16 bool; do
      run --b 1 --h 32 --hkv 8 --nq $nq --nk 16384 --d 128 --mode fwd --mask --mask-dtype $dtype
    done
  done
  run --b 1 --h 32 --hkv 8 --nq 4 --nk 16383 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 4 --nk 16384 --d 128 --mode fwd --mask --mask-sparsity 0.75
  run --b 1 --h 32 --hkv 8 --nq 4 --nk 131072 --d 128 --mode fwd
  run --b 1 --h 32 --hkv 8 --nq 4 --nk 131072 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 2 --nq 1 --nk 16384 --d 128 --mode fwd
  run --b 1 --h 32 --hkv 2 --nq 1 --nk 16384 --d 128 --mode fwd --mask
  run --b 4 --h 32 --hkv 8 --nq 16 --nk 8192 --d 128 --mode fwd --causal
  run --b 4 --h 32 --hkv 8 --nq 16 --nk 8192 --d 128 --mode fwd --causal --mask
}

case "$part" in
  bench)
    sweep 2 "128" "base cap64 new" tensor_core_rows
    ;;
  mutations)
    for v in mut_scan mut_summary; do
      build=build-lab/$v
      catch_tests "$v" '"masks: the decode kernels'"'"' closed steps*"'
      echo "== $v"
      grep -E "decode_splits|passed|failed" "$out/$v.log" | sort | uniq -c | head -12
    done
    ;;
  review-tests)  # after the review's fixes
    build=build-lab/new
    catch_tests review '"masks: the decode kernels*","masks: the tensor-core decode*","masks: a padding mask*"'
    report review
    ;;
  tests)
    build=build-lab/new
    catch_tests decode '"[decode]"' &
    catch_tests mask '"masks: tiles the mask closes*","masks: forward matches*","masks with sequences*"'
    wait
    report decode mask
    ;;
esac
