#!/usr/bin/env bash
# 2026-11-29 (twelfth session), issue 21: the register decode kernel's split-K parts merged by the
# last workgroup of each (KV head, batch) to finish (arrival counters in the workspace), against
# the merge pass behind a barrier. docs/tuning-log.md, "the decode merge fused into the split
# kernel" (not kept: reverted). Builds, each a CLI in build-lab/NAME: new, new2, vmm and pass2vmm
# the tree with the change as each line says, built with cmake (build-gpu) and copied; nomerge and
# pass2 by tools/lab/build_variant.py from new2's tree (nomerge: `if (!merging_workgroup) return;`
# made `if (true) return;`; pass2: the decode shader and the arrival counters' include of new2, with pass2vmm's batch
# merge):
#   cur      the committed code (0f27b45);
#   new      the fused merge counted by compare-and-swap alone, parts read back `coherent`, with
#            its test binary in build-lab/new/tests (first run);
#   new2     counted by an atomic add, the compare-and-swap counter only where the add's counter
#            did not hold the tag (second run);
#   nomerge  new2 without the merge itself (timing only: O wrong): the count and its barriers;
#   vmm      new2 under the Vulkan memory model: the parts read back by plain loads after barriers
#            that make them available and visible at queue-family scope, instead of coherent
#            (volatile) loads; with its test binary in build-lab/vmm/tests (third run);
#   pass2    new2 with each invocation's parts weighed a batch of 32 at once (the batch's max, then
#            independent exponentials) rather than by a chain of rescales (fourth run);
#   pass2vmm vmm with that batch merge.
# Parts:
#   bench  issue 21's goal rows (16k, 32k, 128k keys), then D = 64 at 16k and 128k, B = 4, 8 packed
#          rows (Nq = 2), a float32 bias, softcap + ALiBi + sinks, and a speculative shape (the
#          tensor-core kernel, whose parts still go to the merge pass), cur and new, two rounds;
#          the registers of both kernels;
#   bench2 the goal rows, D = 64 at 16k, B = 4 and Nq = 2 of cur, new2 and nomerge, two rounds;
#          their registers;
#   bench3 the goal rows, D = 64 at 16k and 128k, B = 4, Nq = 2 and softcap + ALiBi + sinks, cur
#          and vmm, two rounds; their registers;
#   bench4 bench3's rows with cur, pass2 and pass2vmm, two rounds;
#   tests  the [decode] tests of $VKFLASH_BUILD_DIR (build-lab/new, or as set: the third run set
#          build-lab/vmm) under trixie's validation layer.
# Carry [".gpu", ".gl", "build-lab"];
# `bash tools/lab/runs/2026-11-29-decode-fused-merge.sh PART...` (several parts run in order).
RUNS=${RUNS:-50}
source tools/lab/runs/run_env.sh  # the GPU environment (build-lab/new), $out, run, sweep, statistics

fused_rows() {
  decode_goal_and_neighbour_rows
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --mask
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50 --alibi --sinks
  run --b 4 --h 32 --hkv 8 --nq 16 --nk 8192 --d 128 --mode fwd --read-ceiling
}
fused_rows3() {
  decode_goal_and_neighbour_rows
  run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --softcap 50 --alibi --sinks
}
for part in "${@:-bench}"; do
  case "$part" in
    bench)
      sweep 2 "128" "cur new" fused_rows
      decode_goal_statistics cur new
      ;;
    bench2)
      fused_rows2() {
        issue21_goal_rows
        run --b 1 --h 32 --hkv 8 --nq 1 --nk 16384 --d 64 --mode fwd --read-ceiling
        run --b 4 --h 32 --hkv 8 --nq 1 --nk 16384 --d 128 --mode fwd --read-ceiling
        run --b 1 --h 32 --hkv 8 --nq 2 --nk 16384 --d 128 --mode fwd --read-ceiling
      }
      sweep 2 "128" "cur new2 nomerge" fused_rows2
      decode_goal_statistics cur new2 nomerge
      ;;
    bench3)
      sweep 2 "128" "cur vmm" fused_rows3
      decode_goal_statistics cur vmm
      ;;
    bench4)
      sweep 2 "128" "cur pass2 pass2vmm" fused_rows3
      ;;
    tests)
      TEST_TIMEOUT=${TEST_TIMEOUT:-300} catch_tests fused-decode '"[decode]"'
      report fused-decode
      ;;
    *)
      echo "unknown part '$part'" >&2
      exit 2
      ;;
  esac
done
