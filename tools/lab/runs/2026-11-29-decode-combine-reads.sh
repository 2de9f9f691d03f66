#!/usr/bin/env bash
# 2026-11-29 (twelfth session), issue 21: the decode merge pass (decode/attention_decode_combine.comp)
# with more parts read at once per invocation. docs/tuning-log.md, "the decode merge pass's reads in
# flight". Builds, each a CLI in build-lab/NAME (tools/lab/build_variant.py):
#   cur      the committed code (e80dbea: READS_IN_FLIGHT = 4, two rounds of reads at 32 parts);
#   reads8   READS_IN_FLIGHT = 8 (one round at 32 parts, D = 128);
#   reads16  READS_IN_FLIGHT = 16;
#   new      the committed change (READS_IN_FLIGHT = 8) with its test binary in build-lab/new/tests.
# Parts:
#   bench  issue 21's goal rows (16k, 32k, 128k keys), D = 64 at 16k and 128k, B = 4 and 8 packed
#          rows (Nq = 2), cur, reads8 and reads16, two rounds;
#   tests  the [decode] tests of build-lab/new under trixie's validation layer.
# Carry [".gpu", ".gl", "build-lab"];
# `bash tools/lab/runs/2026-11-29-decode-combine-reads.sh bench|tests`.
RUNS=${RUNS:-50}
part=${1:-bench}
source tools/lab/runs/run_env.sh  # the GPU environment (build-lab/new), $out, run, sweep, the rows

case "$part" in
  bench) sweep 2 "128" "cur reads8 reads16" decode_goal_and_neighbour_rows ;;
  tests)
    TEST_TIMEOUT=${TEST_TIMEOUT:-400} catch_tests combine-decode '"[decode]"'
    report combine-decode
    ;;
  *)
    echo "unknown part '$part'" >&2
    exit 2
    ;;
esac
