#!/usr/bin/env bash
# 2026-11-28 (ninth session), on an H200: issue 22's table with every family forced, re-measured at
# f0f6c27 (build-lab/new) beside PyTorch in one run (tools/lab/runs/2026-11-27-every-family-table.sh),
# and where issue 21's 16k decode loses its time on this GPU. Timing builds beside build-lab/new, by
# tools/lab/build_variant.py:
#   nocombine     no merge dispatch and no barrier before it (its O is wrong);
#   nosel         the register decode kernel's P V without the select that keeps a masked key's V
#                 out (right only where every pair is visible and V finite: the bench's case);
#   keys4         the register decode kernel with 4 keys per step instead of 8 (up to 4 packed rows);
#   rescale_skip  the scalar forward rescales a row's O only where its max moved (alpha != 1).
# `khr`: the subgroup-scope forward (coopmat/attention_forward_coopmat.comp) staging K and V in
# batches instead of all of an invocation's words at once (64 registers at D = 128 beside O's 64):
#   stage2, stage4  2 or 4 batches of reads, each stored before the next is read;
# and the coopmat2 forward with a bias, open and with 75% of its blocks closed, on this GPU.
# `khr2`: the same kernel's P V, for its registers (254 at D = 128, O through local memory):
#   pall       every key block's P converted to A operands before the first P V product (S's
#              accumulators dead sooner);
#   late       O's rescale moved from the softmax to just before each O block's first P V product;
#   pall_late  both.
# `sparse`: where the coopmat2 forward's block-sparse case (75% of a bias's blocks closed) spends
# the time its visited tiles do not explain, timing builds of coopmat2/attention_forward_coopmat2.comp:
#   noq  Q not read (a constant tile);  noo  O not stored;
# and the same visited tiles as an open bias over 1024 keys (a short loop of the same steps).
# `cm2`: the coopmat2 forward's Q and O through the K/V tiles' shared memory (16-byte copies and a
# matrix load / store from shared memory) instead of tensor-layout loads and stores:
#   qs  Q only;  os  O only;  qos  both.
# `bwd`: the coopmat2 backward's stores the same way, with the forward's O through the tiles in
# every build (build-lab/cur, the working tree), against f0f6c27 (new):
#   bq  dQ through the K/V tiles;  bkv  dK and dV through the tiles, one after the other;  bboth.
# `final`: the kept build (build-lab/cur: the forward's O and the backward's dQ, dK and dV through
# shared memory) against f0f6c27, PyTorch's FlashAttention-2 at D = 128 in the same run, then the
# Catch2 tests that reach the coopmat2 kernels (auto) under trixie's validation layer.
# Carry [".gpu", ".gl", "build-lab"]; `bash tools/lab/runs/2026-11-28-h200-table-decode.sh first|...`.
part=${1:-first}
source tools/lab/runs/run_env.sh  # the GPU environment, $out, run, sweep, sass, the rows

scalar_rows() {
  run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel scalar --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
}

khr_rows() {
  run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
  run --kernel coopmat_khr --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
  run --kernel coopmat_nv --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
}

# subgroup_statistics "BUILDS": the driver's statistics of the KHR and NV forwards of each build, D = 128 and 64.
subgroup_statistics() {
  local v d
  for v in $1; do
    for d in 128 64; do
      echo "== statistics $v D=$d"
      statistics $v coopmat_khr $d fwd
      statistics $v coopmat_nv $d fwd
    done
  done
}

# checks "BUILDS" "KERNELS" ARGS...: `vkflash check` (O and LSE against the CPU's float64) of each
# build with each kernel family forced, D = 128 and 64, float16, once per ARGS string; the verdicts.
checks() {
  local builds=$1 kernels=$2 v d k args
  shift 2
  for v in $builds; do
    for d in 128 64; do
      for k in $kernels; do
        echo "== check $v $k D=$d"
        for args in "$@"; do
          VKFLASH_KERNELS=$k build-lab/$v/vkflash check --dtype f16 --d $d $args --repeats 0 2>&1 | tail -1
        done
      done
    done
  done
}

case "$part" in
  first)
    echo "=== decode"
    RUNS=50 sweep 2 "128" "new nocombine nosel keys4" issue21_goal_rows
    cli=build-lab/new/vkflash
    for splits in 16 24 48 66; do
      echo "== splits $splits"
      VKFLASH_DECODE_SPLITS=$splits RUNS=50 run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --read-ceiling
    done
    echo "=== scalar forward"
    sweep 2 "128 64" "new rescale_skip" scalar_rows
    sass new --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd
    sass nosel --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd
    echo "=== every family"
    bash tools/lab/runs/2026-11-27-every-family-table.sh
    ;;
  khr)
    subgroup_statistics "new stage2 stage4"
    checks "stage2 stage4" "coopmat_khr coopmat_nv" "--nq 200 --nk 333" "--nq 333 --nk 333 --causal"
    sweep 2 "128 64" "new stage2 stage4" khr_rows
    cli=build-lab/new/vkflash
    echo "=== block-sparse (coopmat2)"
    for d in 128 64; do
      for mask in "" "--mask" "--mask --mask-sparsity 0.75"; do
        echo "== D=$d $mask"
        run --kernel coopmat2 --b 4 --h $((2048 / d)) --n 4096 --d $d --mode fwd $mask
      done
    done
    ;;
  khr2)
    subgroup_statistics "new pall late pall_late"
    checks "pall late pall_late" "coopmat_khr coopmat_nv" "--nq 200 --nk 333" "--nq 333 --nk 333 --causal" \
      "--nq 130 --nk 333 --softcap 30 --alibi --sinks --mask"
    sweep 2 "128 64" "new pall late pall_late" khr_rows
    ;;
  sparse)
    sparse_rows() {
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75
      run --kernel coopmat2 --b 4 --h "$2" --nq 4096 --nk 1024 --d "$1" --mode fwd
      run --kernel coopmat2 --b 4 --h "$2" --nq 4096 --nk 1024 --d "$1" --mode fwd --mask
    }
    sweep 2 "64 128" "new noq noo" sparse_rows
    ;;
  cm2)
    for v in new qs os qos; do
      for d in 128 64; do
        echo "== statistics $v D=$d"
        statistics $v coopmat2 $d fwd --b 4 --h $((2048 / d)) --n 4096 --mask
      done
    done
    checks "qs os qos" coopmat2 "" "--causal" "--nq 200 --nk 333" "--nq 333 --nk 200 --causal" \
      "--softcap 30 --alibi --sinks --mask" "--mask --mask-sparsity 0.5 --nq 300 --nk 500"
    cm2_rows() {
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --causal
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode fwd --mask --mask-sparsity 0.75
      run --kernel coopmat2 --b 16 --h "$2" --n 1024 --d "$1" --mode fwd
      run --kernel coopmat2 --b 1 --h "$2" --n 16384 --d "$1" --mode fwd
    }
    sweep 2 "64 128" "new qs os qos" cm2_rows
    ;;
  bwd)
    bwd_rows() {
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --causal
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --mask
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --mask --mask-sparsity 0.75
      run --kernel coopmat2 --b 16 --h "$2" --n 1024 --d "$1" --mode bwd
    }
    sweep 2 "64 128" "new cur bq bkv bboth" bwd_rows
    ;;
  final)
    final_rows() {
      local mode
      for mode in fwd bwd; do
        run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode $mode
        run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode $mode --causal
        run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode $mode --mask
        run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode $mode --mask --mask-sparsity 0.75
      done
      run --kernel coopmat2 --b 4 --h "$2" --n 4096 --d "$1" --mode bwd --nondeterministic
    }
    sweep 1 "128 64" "new cur" final_rows
    echo "== PyTorch flash, B = 4, H = 16, N = 4096, D = 128: forward / backward TFLOP/s"
    python3 - <<'PY' 2>&1 | tail -2
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
def bench(fn, iters=20, warm=5):
    for _ in range(warm): fn()
    torch.cuda.synchronize(); ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts) // 2] / 1e3
q = torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.float16, requires_grad=True)
k = torch.randn_like(q, requires_grad=True); v = torch.randn_like(q, requires_grad=True)
flops = 4 * 4 * 16 * 4096 * 4096 * 128
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    f = lambda: F.scaled_dot_product_attention(q, k, v)
    t = bench(f); o = f(); g = torch.randn_like(o)
    tb = bench(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True))
print(round(flops / t / 1e12, 1), round(2.5 * flops / tb / 1e12, 1))
PY
    build=build-lab/cur
    TEST_TIMEOUT=${TEST_TIMEOUT:-270} catch_tests final-backward "'[backward]'" &
    TEST_TIMEOUT=${TEST_TIMEOUT:-270} catch_tests final-forward "'[forward]'" &
    TEST_TIMEOUT=${TEST_TIMEOUT:-270} catch_tests final-masks "'[mask],[sequences],[nonfinite],[stored_ds],[atomic]'" &
    TEST_TIMEOUT=${TEST_TIMEOUT:-270} catch_tests final-variants "'[window],[softcap],[sinks],[alibi]'" &
    wait
    report final-backward final-forward final-masks final-variants
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
