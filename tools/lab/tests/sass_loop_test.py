#!/usr/bin/env python3
"""Checks tools/lab/sass_loop.py on a fixed piece of the H100 driver's code: the loop it finds, the
scoreboards it decodes from the encodings, and which instruction it reports as waiting for each
buffer load. Runs without a GPU (ctest)."""
import importlib.util
import io
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tools", "lab", "tests", "sass_loop_fixture.sass")
spec = importlib.util.spec_from_file_location("sass_loop", os.path.join(ROOT, "tools", "lab", "sass_loop.py"))
sass_loop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sass_loop)

failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


lines = open(FIXTURE).read().splitlines()
instructions = sass_loop.parse(lines)
expect([i.opcode for i in instructions] ==
       ["LDG.E.128.CONSTANT", "LDG.E.128.CONSTANT", "IMAD.MOV.U32", "HMMA.16816.F32", "IMAD.MOV.U32", "BRA"],
       "opcodes of the six instructions (predicates stripped)")
expect([i.write_sb for i in instructions[:2]] == [2, 3], "the two loads set scoreboards 2 and 3")
expect(instructions[2].waits_for(2) and not instructions[2].waits_for(3), "the first copy waits for scoreboard 2 only")
expect(instructions[3].waits_for(0) and instructions[3].waits_for(1) and not instructions[3].waits_for(3),
       "the product waits for scoreboards 0 and 1 (its shared-memory operands), not for the loads")

loop = sass_loop.main_loop(instructions)
expect(loop is not None and len(loop) == 6 and loop[0].address == 0x100, "the loop spans all six instructions")

waits = sass_loop.load_waits(loop)
expect([(load.address, waiter.address if waiter else None, between, products)
        for load, waiter, between, products in waits] ==
       [(0x100, 0x120, 1, 0), (0x110, 0x140, 2, 1)], f"load waits: {[(hex(l.address), b, p) for l, _, b, p in waits]}")

out = io.StringIO()
sass_loop.report(FIXTURE, out)
expect("LDG at 0x100 (scoreboard 2): waited for at 0x120 (IMAD.MOV.U32), 1 instructions and 0 HMMA later"
       in out.getvalue(), "report line of the first load")

# Without the encodings (a listing made without --hex) the loop is still found, but nothing is
# said about scoreboards.
plain = [line for line in lines if not sass_loop.HEX_WORD.match(line)]
plain_loop = sass_loop.main_loop(sass_loop.parse(plain))
expect(plain_loop is not None and len(plain_loop) == 6, "loop found in a listing without encodings")
expect(sass_loop.load_waits(plain_loop) == [], "no load waits without encodings")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("sass_loop.py: all checks passed")
