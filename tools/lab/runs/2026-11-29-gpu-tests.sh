#!/bin/bash
# 2026-11-29, on an H200: the Catch2 cases that the GPU run of 2026-11-28's "outputs through shared
# memory" (docs/tuning-log.md) did not reach, with the kernels `auto` picks (coopmat2, whose
# outputs leave through shared memory): seven processes at once, each cut after $TEST_TIMEOUT
# seconds (500), under trixie's validation layer. build-lab/new holds the CLI and the Catch2 binary
# (its tests/ folder) of the build to test (be0ecf0 in the logged run). Carry [".gpu", ".gl", "build-lab"];
# `bash tools/lab/runs/2026-11-29-gpu-tests.sh`.
source tools/lab/runs/run_env.sh
link_cli  # for the [cli] cases
mkdir -p /tmp/specs
cat > /tmp/specs/g0.txt <<'SPEC'
masks: tiles the mask closes are skipped\, their K and V never read,the per-row gradient kernels are right past the driver's loop budget,decode: recorded without a workspace\, a split call runs as one part
SPEC
cat > /tmp/specs/g1.txt <<'SPEC'
masks: backward and the bias's gradient match the float64 reference,score variants over a KV cache: decode and speculative rows,score variants: rows that see no key get zeros\, the sink or -inf\, and zero gradients,sinks: rows whose keys' P lie below float16's normal range keep O's precision,CLI backward refuses bad input with exit 2 and writes no gradient file
SPEC
cat > /tmp/specs/g2.txt <<'SPEC'
masks: loops of more than 1024 tiles skip closed tiles past the first 1024 too,softcap\, ALiBi and sinks together with causal masks and windows: forward,masks: rows the mask blocks entirely get zeros\, -inf or the sink\, and zero gradients,dsinks are bit-identical run after run,masks: keys far below an earlier tile's largest score keep O's precision,sinks: a sink of +inf or NaN makes its head's rows NaN\, and no other head's
SPEC
cat > /tmp/specs/g3.txt <<'SPEC'
masks: the tensor-core decode kernel's packed rows each add their own mask row\, each broadcast,masks: forward matches the float64 reference\, each element type and broadcast,softcap\, ALiBi and sinks together with causal masks and windows: backward,masks: a padding mask over a KV cache\, decode and speculative rows,score variants with KV lengths: ALiBi's distances and causal alignment per sequence,sinks: -inf is no sink\, and a large sink takes the whole row
SPEC
cat > /tmp/specs/g4.txt <<'SPEC'
masks: the decode kernels' closed steps\, from the summary (long parts) or the mask (short),sinks: backward matches the float64 reference gradients\, dsinks included,masks with sequences: a KV cache's lengths and ragged batches index the mask by each sequence's rows,CLI --mask and --dbias: broadcast masks of each type\, and bad ones refused with exit 2,CLI backward writes dQ\, dK\, dV matching the float64 reference gradients,sinks: a row that sees no key gets zeros and its sink's LSE\, however far below every score,mask parameters and buffers: checked\, and refused before anything runs
SPEC
cat > /tmp/specs/g5.txt <<'SPEC'
ALiBi: backward matches the float64 reference gradients,backward is right past the driver's loop budget\, on both gradient kernels,masks: the decode kernels skip a key tile only where the mask closes it for every packed row,masks: the bias's gradient is bit-identical run after run\, summed over broadcast dimensions,CLI forward and backward with --softcap\, --alibi and --sinks match the float64 reference,masks: the gradient of a bias without the keys dimension is 0\, as the softmax cannot see it,masks: the decode kernels read the mask's terms for the packed rows that differ\, and the summary where a scan would cost more
SPEC
cat > /tmp/specs/g6.txt <<'SPEC'
sequences and strides in chunks (a driver's loop budget)\, with descriptor sets\, and mobile limits
SPEC
for i in 0 1 2 3 4 5 6; do
  TEST_TIMEOUT=${TEST_TIMEOUT:-500} catch_tests "tests-g$i" "$(printf %q "$(cat /tmp/specs/g$i.txt)")" &
done
wait
report tests-g0 tests-g1 tests-g2 tests-g3 tests-g4 tests-g5 tests-g6
