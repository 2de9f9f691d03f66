#!/usr/bin/env bash
# 2026-11-27, issue 23: fewer instructions per score for the softcap (common/score_mod.glsl
# softcapped: C2 - 2 C2 / (1 + 2^(2t / C)) instead of C2 tanh(t / C2) through |x|, exp2, two adds,
# a division and a sign), docs/tuning-log.md "the softcap's instructions". Carry
# [".gpu", ".gl", "build-lab"], build-lab/ holding:
#   new/vkflash, new/tests/vkflash_tests, new/CMakeCache.txt   this change's build-gpu
#   base/vkflash     the commit before it (531216f)
#   rcp/vkflash      the change with `(2 c2) * (1 / (1 + e))` for `2 c2 / (1 + e)`
#   rational/vkflash the first try (dropped): tanh as x P(x^2) / Q(x^2) with a Newton reciprocal,
#                    no exp2 or division (run once, 2026-11-27; its code is in the tuning log)
# and run `bash tools/lab/runs/2026-11-27-softcap.sh bench|tests|bias-view|families`.
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, catch_tests, report
variants=$(for v in ${VARIANTS:-base new rcp}; do [ -x build-lab/$v/vkflash ] && echo $v; done)  # those built

# D H ROUND BUILD: the plain kernel (base only), softcap 50; in the first round with ALiBi, sinks, causal.
softcap_rows() {
  local d=$1 h=$2 round=$3 v=$4
  [ $v = base ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both
  run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --softcap 50
  [ $round = 1 ] && run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --softcap 50 --alibi --sinks --causal
}
# D H ROUND BUILD: float32 and float16 bias.
bias_rows() {
  local d=$1 h=$2
  run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask
  run --kernel coopmat2 --b 4 --h $h --n 4096 --d $d --mode both --mask --mask-dtype f16
}

if [ "$part" = bench ]; then
  sweep 2 "128 64" "$variants" softcap_rows
  for v in base new; do
    cli=build-lab/$v/vkflash
    echo "== $v decode, scalar and KHR"
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd
    run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50
    run --kernel scalar --b 4 --h 16 --n 4096 --d 128 --mode both --softcap 50
    run --kernel coopmat_khr --b 4 --h 16 --n 4096 --d 128 --mode both --softcap 50
  done
  echo "== softcap accuracy"
  for v in $variants; do
    for dt in f16 f32; do
      build-lab/$v/vkflash check --b 2 --hq 8 --hkv 2 --nq 1024 --nk 1024 --d 128 --dtype $dt --softcap 20 --repeats 1 2>&1 |
        grep -E "error|PASS|FAIL" | sed "s/^/$v $dt: /"
    done
  done
fi

if [ "$part" = tests ]; then
  catch_tests softcap_forward '"softcap: forward*","*together with causal masks and windows: forward","score variants*"' &
  catch_tests softcap_backward '"softcap: backward*"' &
  catch_tests softcap_together '"*together with causal masks and windows: backward"' &
  wait
  report softcap_forward softcap_backward softcap_together
fi

# The same day: one VKF_DEFINE_BIAS_TILE for the plain and the transposed bias tile (an identity
# tensor view for the plain one), timed against base and tested with the softcap's together tests.
if [ "$part" = bias-view ]; then
  sweep 2 "128 64" "base new" bias_rows
  catch_tests mask_forward '"masks: forward matches*","masks: rows the mask*","masks: a padding*","masks: the bias*","masks: the gradient*","masks with sequences*"' &
  catch_tests mask_backward '"masks: backward and*"' &
  catch_tests softcap_forward '"*together with causal masks and windows: forward"' &
  catch_tests softcap_together '"*together with causal masks and windows: backward"' &
  wait
  report mask_forward mask_backward softcap_forward softcap_together
fi

# The softcap's tests with each family forced (the final build as new/).
if [ "$part" = families ]; then
  for k in scalar coopmat_khr coopmat_nv; do
    catch_tests softcap_$k "'[softcap]~[api]~[cli]'" VKFLASH_KERNELS=$k &
  done
  wait
  report softcap_scalar softcap_coopmat_khr softcap_coopmat_nv
fi
