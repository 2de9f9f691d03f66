#!/usr/bin/env bash
# 2026-11-29 (fifteenth session): ALiBi's distance turned into a float without an integer-to-float
# conversion (common/score_mod.glsl's small_int_to_float: an integer add and a float subtraction),
# in every kernel. Builds: build-lab/base (the conversion, `float(abs(...))`: build_variant.py
# `alibiconv`) and build-lab/new (the change; its tests binary beside it).
# `bench`: B = 4, N = 4096, H = 2048 / D, coopmat2 forward and backward, plain / ALiBi / softcap +
# ALiBi + sinks, and ALiBi with the scalar and KHR families forced and over a KV cache, two rounds;
# `sass`: both builds' coopmat2 forward with ALiBi at D = 64, the conversions counted; `tests`: new's
# [alibi] cases on the H200, auto and each family forced (trixie's validation layer; the [cli] ones
# fail there, exit 127: the part does not link the CLI). Second run: `tests2`: the [alibi] cases
# with auto kernels again (`tests` stopped them at 300 s) and the CLI's [alibi] cases with each
# family (link_cli); `tiles`: ALiBi at D = 128 on 128x64x256 against the table's 64x64x128;
# `sass2`: new's coopmat2 kernels with a softcap (forward D = 128 and 64, backward D = 64), tarred.
# The families' CLI cases of `tests2` ran at once and share their case folders, and failed so; third
# run: `tests3`, the CLI's [alibi] cases with each family one after another, and `vkflash check` with
# ALiBi over 70,000 keys (distances past 2^16) with each family.
# Fourth run: `dsmin`: build-lab/dsmin, the coopmat2 backward's softcap derivative from P without
# its p == 0 test (score_mod_derivative_from_p; the rows whose LSE is +inf take the largest float
# instead, and the max takes log2(0)'s -inf to 0), against new; `table`, issue 23's score variants
# against plain at f0d405e (build-lab/new: the ALiBi change, committed), two rounds.
# Fifth run, dsmin kept (build-lab/new2: the working tree with it, and its tests binary): `tests4`,
# its softcap, combined-variant and mask backward cases on the H200 (auto kernels), and `vkflash
# backward` of new and new2 on the same inputs (build-lab/inputs: float16, B = 1, Hq = 4, Hkv = 2,
# Nq = 700, Nk = 500, D = 64 and 128, Normal random values written as .npy by a few lines of plain
# Python), whose outputs must be the same bytes.
# The variants, built from the working tree of their day:
#   python3 tools/lab/build_variant.py alibiconv shaders/common/score_mod.glsl \
#     "  return slope_log2 * abs(small_int_to_float(int(key) - int(q_row) - diagonal_shift(q_len, kv_len)));" \
#     "  return slope_log2 * float(abs(int(key) - int(q_row) - diagonal_shift(q_len, kv_len)));"
#   python3 tools/lab/build_variant.py dsmin shaders/common/score_mod.glsl \
#     "  if (p == 0.0) return 0.0;
#   float capped = log2(p) + lse_log2;" \
#     "  if ((MASK == VKF_MASK_FLOAT32 || MASK == VKF_MASK_FLOAT16) && p == 0.0) return 0.0;
#   float capped = log2(p) + min(lse_log2, uintBitsToFloat(0x7f7fffffu));"
# (dsmin's NEW also had a two-line comment above its first line; build-gpu/var/NAME/vkflash,
# copied to build-lab/base and build-lab/dsmin.)
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-29-alibi-distance.sh bench sass tests`,
# then `... tests2 tiles sass2`, then `... tests3`, then `... dsmin table`, then `... tests4`.
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, catch_tests, report

alibi_rows() {
  local mode
  for mode in fwd bwd; do
    run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode $mode
    run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode $mode --alibi
    run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode $mode --alibi --causal
    run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode $mode --softcap 50 --alibi --sinks
  done
  [ "$1" = 128 ] || return 0
  run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --alibi
  run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --alibi
  RUNS=50 run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd
  RUNS=50 run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --alibi
}

for part in "$@"; do
  case $part in
    bench)
      sweep 2 "64 128" "base new" alibi_rows > "$out/bench.log" 2>&1
      awk '/_f16/{print $6, $8, $9, $(NF-4); next}{print}' "$out/bench.log"
      ;;
    sass)
      for v in base new; do
        sass $v --kernel coopmat2 --b 1 --h 2 --n 1024 --d 64 --mode fwd --alibi
        echo "== $v: conversions, instructions per forward kernel"
        for f in "$out/sass_$v"/*; do
          echo "$(basename "$f"): I2F $(grep -c "I2F" "$f"), lines $(wc -l < "$f")"
        done
      done
      ;;
    tests)
      build=build-lab/new
      family_tests "alibi-%s" '"[alibi]"' auto scalar coopmat_khr coopmat_nv
      ;;
    tests2)
      build=build-lab/new
      link_cli
      TEST_TIMEOUT=560 catch_tests alibi-auto2 '"[alibi]"' &
      TEST_TIMEOUT=560 family_tests "alibi-cli-%s" '"[cli][alibi]"' auto scalar coopmat_khr coopmat_nv &
      wait
      report alibi-auto2
      ;;
    tiles)
      for round in 1 2; do
        for tile in default 128x64x256; do
          echo "== round $round tile $tile"
          for extra in "" "--causal"; do
            env $([ $tile = default ] || echo VKFLASH_COOPMAT2_FORWARD_TILE=$tile) build-lab/new/vkflash bench --no-naive \
              --runs 20 --min-time-ms 200 --kernel coopmat2 --b 4 --h 16 --n 4096 --d 128 --mode fwd --alibi $extra 2>&1 |
              grep -E "^ +[0-9]|error" | awk '{print $6, $8, $9, $(NF-4)}'
          done
        done
      done
      ;;
    sass2)
      for args in "--d 128 --mode fwd" "--d 64 --mode fwd" "--d 64 --mode bwd"; do
        sass new --kernel coopmat2 --b 1 --h 2 --n 1024 --softcap 50 $args
        name=$(echo "$args" | tr -d ' -')
        mv "$out/sass_new" "$out/sass_softcap_$name"
      done
      tar -C "$out" -czf "$out/sass_softcap.tgz" $(cd "$out" && ls -d sass_softcap_*) && rm -rf "$out"/sass_softcap_*/
      ;;
    tests3)
      build=build-lab/new
      link_cli
      for family in auto scalar coopmat_khr coopmat_nv; do
        catch_tests "alibi-cli3-$family" '"[cli][alibi]"' VKFLASH_KERNELS=$family
        report "alibi-cli3-$family"
        for extra in "--nq 64" "--nq 64 --causal" "--nq 1"; do
          echo "-- check $family $extra"
          VKFLASH_KERNELS=$family build-lab/new/vkflash check --b 1 --hq 8 --hkv 2 --nk 70000 --d 128 --dtype f16 \
            --alibi --repeats 1 $extra 2>&1 | grep -E "kernel|error|PASS|FAIL"
        done
      done
      ;;
    table)
      sweep 2 "128 64" new score_variant_rows > "$out/table.log" 2>&1
      awk '/_f16/{print $6, $8, $9, $10, $(NF-4), $(NF-3); next}{print}' "$out/table.log"
      ;;
    dsmin)
      dsmin_rows() {
        run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --softcap 50
        run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --softcap 50 --alibi --sinks
        run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --softcap 50 --alibi --sinks --causal
      }
      sweep 2 "64 128" "new dsmin" dsmin_rows > "$out/dsmin.log" 2>&1
      awk '/_f16/{print $6, $8, $9, $(NF-4); next}{print}' "$out/dsmin.log"
      ;;
    tests4)
      build=build-lab/new2
      catch_tests ds-softcap '"softcap: backward matches*","softcap: scores far past*"' &
      catch_tests ds-all '"*sinks together with causal masks and windows: backward","score variants: rows that see no key*","score variants over a KV cache*"' &
      catch_tests ds-mask '"masks: backward and the bias*","masks: rows the mask blocks entirely*"' &
      in=build-lab/inputs
      for d in 64 128; do
        for extra in "--softcap 30" "--softcap 30 --causal --alibi $in/slopes.npy --sinks $in/sinks.npy" \
                     "--softcap 10 --window 50,0"; do
          for v in new new2; do
            rm -rf "$out/bwd_$v" && mkdir -p "$out/bwd_$v"  # no file of the last configuration left to compare
            build-lab/$v/vkflash backward --q $in/q$d.npy --k $in/k$d.npy --v $in/v$d.npy --do $in/do$d.npy \
              --dq "$out/bwd_$v/dq.npy" --dk "$out/bwd_$v/dk.npy" --dv "$out/bwd_$v/dv.npy" $extra > /dev/null 2>&1 ||
              echo "backward failed: $v D=$d $extra"
          done
          for f in dq dk dv; do
            cmp -s "$out/bwd_new/$f.npy" "$out/bwd_new2/$f.npy" && echo "D=$d $extra $f: same bytes" ||
              echo "D=$d $extra $f: DIFFERENT"
          done
        done
      done
      rm -rf "$out"/bwd_new "$out"/bwd_new2
      wait
      report ds-softcap ds-all ds-mask
      ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
