#!/usr/bin/env bash
# 2026-11-28 (fourth session), the register decode kernel's per-step verdict on its mask terms as one
# subgroup vote (issue 23), and the tensor-core decode kernel's scan tested with rows that differ.
# build-lab/new: 6822b36 with the new test "masks: the decode kernels skip a key tile only where the
# mask closes it for every packed row"; build-lab/vote: its CLI with mask_closes_step's shuffles
# replaced by one vote over the subgroup (its key groups decide together: a step is skipped where
# the mask closes every key group's step of the subgroup), made by tools/lab/build_variant.py from
# shaders/decode/attention_forward_decode.comp:
#   "...; ++level) open |= subgroupShuffleXor(open, T >> (level + 1));\n  return open == 0;"
#     -> "  return !subgroupAny(open != 0);" (and GL_KHR_shader_subgroup_vote enabled)
# build-lab/mut_rows: a test binary whose tensor-core decode kernel scans mask row 0 for every term
# row ("row % q_len," -> "0u," in the scan): the new test must fail, on the scan's way only.
# Second run: build-lab/uniform: the key loop's trip count the same in every key group (steps past
# the part's keys run masked; the clamped loads read its last key), so that the loop's control is
# uniform: "  for (uint key0 = first_key; key0 < key_end; key0 += key_step) {" ->
#   "  const uint steps = key_end > key_begin ? (key_end - key_begin + key_step - 1) / key_step : 0;
#    uint key0 = first_key;
#    for (uint step = 0; step < steps; ++step, key0 += key_step) {"
# build-lab/vote_uniform: both changes. `... checks` compares each build with the CPU.
# Third run, the change as committed: build-lab/new (the vote, with the device's subgroup votes
# checked by the engine) against build-lab/base (its CLI with the kernel of 6822b36, built by
# build_variant.py with "@FILE" and `git show 6822b36:shaders/decode/attention_forward_decode.comp`);
# `final` times both, `final-tests` runs the decode and mask tests with build-lab/new.
# Fourth run: build-lab/new: the tensor-core decode kernel's scan reading its at most
# VKF_DECODE_SCAN_MAX_PER_INVOCATION (4) elements an invocation in one trip of 4 loads, where it read
# 8 (the last 4 the last element again); build-lab/base: f2d301d's kernel in the same build
# ("@FILE", `git show f2d301d:shaders/decode/attention_forward_decode_coopmat2.comp`). `scan` times
# both, `scan-tests` runs the tensor-core decode mask tests.
# Carry [".gpu", ".gl", "build-lab"];
# `bash tools/lab/runs/2026-11-28-decode-mask-vote.sh bench|tests|sass|uniform|checks|final|final-tests|scan|scan-tests`.
part=${1:-bench}
RUNS=${RUNS:-50}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report, the rows

verdict_rows() {
  local d
  for d in 64 128; do
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d $d --mode fwd
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d $d --mode fwd --mask
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d $d --mode fwd --mask --mask-dtype f16
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d $d --mode fwd --mask --mask-sparsity 0.75
  done
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --mask --mask-dtype f16
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 131072 --d 128 --mode fwd --mask --mask-sparsity 0.75
}

case "$part" in
  scan)
    scan_rows() {
      run --b 1 --h 32 --hkv 2 --nq 1 --nk 16384 --d 128 --mode fwd
      run --b 1 --h 32 --hkv 2 --nq 1 --nk 16384 --d 128 --mode fwd --mask
      run --b 1 --h 32 --hkv 2 --nq 1 --nk 16384 --d 128 --mode fwd --mask --mask-dtype f16
      run --b 1 --h 32 --hkv 2 --nq 1 --nk 16384 --d 128 --mode fwd --mask --mask-sparsity 0.75
      run --b 1 --h 32 --hkv 2 --nq 1 --nk 8192 --d 128 --mode fwd --mask
    }
    sweep 3 "128" "base new" scan_rows
    ;;
  scan-tests)
    build=build-lab/new
    catch_tests scan '"masks: the decode kernels*","masks: the tensor-core decode*","masks: a padding mask*"'
    report scan
    ;;
  final)
    sweep 2 "128" "base new" verdict_rows
    ;;
  final-tests)
    build=build-lab/new
    catch_tests decode '"[decode]"' &
    catch_tests mask '"[mask]"'
    wait
    report decode mask
    ;;
  uniform)
    sweep 2 "128" "${BUILDS:-new vote uniform vote_uniform}" verdict_rows
    sweep 2 "128" "${BUILDS:-new vote uniform vote_uniform}" issue21_goal_rows
    ;;
  checks)
    for v in ${BUILDS:-new vote uniform vote_uniform}; do
      echo "== $v"
      for args in "--nq 1 --nk 3000 --d 128" "--nq 2 --nk 3001 --d 128 --mask" "--nq 1 --nk 16384 --d 64 --mask --mask-dtype f16" \
                  "--nq 1 --nk 16383 --d 128 --mask --mask-sparsity 0.6" "--nq 3 --nk 777 --d 64 --causal --mask --mask-dtype bool" \
                  "--nq 1 --nk 200 --d 128 --sinks --alibi --softcap 20 --mask"; do
        build-lab/$v/vkflash check --b 2 --hq 32 --hkv 8 --dtype f16 --repeats 1 $args 2>&1 | grep -iE "error|max|pass|fail|kernel" | head -3
      done
    done
    ;;
  bench)
    sweep 2 "128" "${BUILDS:-new vote}" verdict_rows
    ;;
  sass)
    sass new --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --mask
    sass vote --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --mask
    ;;
  tests)
    build=build-lab/new
    catch_tests rows '"masks: the decode kernels skip*","masks: the decode kernels'"'"' closed steps*"'
    build=build-lab/mut_rows
    catch_tests mut_rows '"masks: the decode kernels skip*"'
    report rows
    echo "== mut_rows"
    grep -E "decode_splits|passed|failed" "$out/mut_rows.log" | sort | uniq -c | head -12
    ;;
esac
