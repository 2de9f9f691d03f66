#!/usr/bin/env python3
"""Summarizes the main loop of a shader listing from dump_sass.py, and where its buffer loads wait.

    python3 tools/lab/sass_loop.py OUT_DIR/shader0_hmma132.sass [...]

For each listing: the loop (the backward branch that spans the most code), its instruction
counts by opcode, and the order of its barriers, buffer loads (LDG), shared-memory stores (STS),
matrix loads (LDSM) and tensor-core products (HMMA), runs of one kind collapsed ("HMMAx64@120":
64 products from the loop's 120th instruction on).

A listing made with `dump_sass.py --hex` also carries each instruction's control bits: the
scoreboard (0-5) a variable-latency instruction sets when its result is ready, and the scoreboards
an instruction waits for. The script then lists, for every buffer load in the loop, the first
instruction that waits for it and how many instructions (and tensor-core products) lie between:
a load meant to be read a whole step ahead is no prefetch if it is waited for a few instructions
later. Found this way on the H100 (driver 580.159): a load under a branch (`if (has_next) load`)
is followed at once by a predicated copy of its result into other registers, which waits for it.

The control-bit layout (bits 105-125 of each 128-bit Volta-to-Hopper instruction: stall, yield,
write scoreboard, read scoreboard, wait mask, reuse) is the community's decoding (e.g. the
"Dissecting the NVIDIA Volta GPU architecture via microbenchmarking" report), not NVIDIA's.
"""
import argparse
import collections
import re
import sys

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*;(?:\s+/\* (0x[0-9a-f]+) \*/)?")
HEX_WORD = re.compile(r"^\s+/\* (0x[0-9a-f]+) \*/\s*$")
NO_SCOREBOARD = 7
EVENT_KINDS = ("BAR", "LDG", "STS", "LDSM", "HMMA", "LDL", "STL")


class Instruction:
    def __init__(self, address, text, high_word=None):
        self.address, self.text = address, text
        self.opcode = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0] if text else ""
        self.write_sb = self.wait_mask = None
        if high_word is not None:
            control = high_word >> 41  # bit 105 of the instruction is bit 41 of its high word
            self.write_sb = (control >> 5) & 7
            self.wait_mask = (control >> 11) & 63

    def waits_for(self, scoreboard):
        return self.wait_mask is not None and (self.wait_mask >> scoreboard) & 1 == 1


def parse(lines):
    """Instructions of a listing; a -hex listing puts the high 64 bits on the line after each one."""
    out = []
    for i, line in enumerate(lines):
        m = INSTRUCTION.match(line)
        if not m:
            continue
        high = None
        if m.group(3) and i + 1 < len(lines):
            h = HEX_WORD.match(lines[i + 1])
            high = int(h.group(1), 16) if h else None
        out.append(Instruction(int(m.group(1), 16), m.group(2), high))
    return out


def main_loop(instructions):
    """The instructions of the backward branch that spans the most code, or None."""
    best = None
    for ins in instructions:
        m = re.search(r"\bBRA (0x[0-9a-f]+)", ins.text)
        if m and int(m.group(1), 16) < ins.address:
            span = (int(m.group(1), 16), ins.address)
            if best is None or span[1] - span[0] > best[1] - best[0]:
                best = span
    if best is None:
        return None
    return [ins for ins in instructions if best[0] <= ins.address <= best[1]]


def event_sequence(loop):
    """Runs of barriers, loads, stores and products, e.g. ['BAR.SYNCx1@14', 'LDG.E.128.CONSTANTx8@33']."""
    seq, previous, count, start = [], None, 0, 0
    for i, ins in enumerate(loop):
        kind = next((k for k in EVENT_KINDS if ins.opcode.startswith(k)), None)
        if kind is None:
            continue
        name = ins.opcode if kind in ("BAR", "LDG", "STS") else kind
        if name == previous:
            count += 1
        else:
            if previous:
                seq.append(f"{previous}x{count}@{start}")
            previous, count, start = name, 1, i
    if previous:
        seq.append(f"{previous}x{count}@{start}")
    return seq


def load_waits(loop):
    """(load, first waiter, instructions between, products between) for every LDG of the loop
    whose scoreboard is known; the waiter is None if nothing in the loop waits for it."""
    found = []
    for i, ins in enumerate(loop):
        if not ins.opcode.startswith("LDG") or ins.write_sb in (None, NO_SCOREBOARD):
            continue
        waiter, products = None, 0
        for j in range(i + 1, len(loop)):
            if loop[j].waits_for(ins.write_sb):
                waiter = j
                break
            products += loop[j].opcode.startswith("HMMA")
        found.append((ins, loop[waiter] if waiter is not None else None,
                      (waiter - i - 1) if waiter is not None else None, products))
    return found


def report(path, out):
    instructions = parse(open(path).read().splitlines())
    loop = main_loop(instructions)
    if loop is None:
        print(f"{path}: no loop", file=out)
        return
    print(f"== {path}: loop {loop[0].address:#x}-{loop[-1].address:#x}, {len(loop)} instructions", file=out)
    top = collections.Counter(ins.opcode for ins in loop).most_common(12)
    print("  counts: " + ", ".join(f"{op} {n}" for op, n in top), file=out)
    print("  order:  " + " ".join(event_sequence(loop)), file=out)
    for load, waiter, between, products in load_waits(loop):
        where = (f"waited for at {waiter.address:#x} ({waiter.opcode}), {between} instructions and {products} HMMA later"
                 if waiter else "not waited for inside the loop")
        print(f"  LDG at {load.address:#x} (scoreboard {load.write_sb}): {where}", file=out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("listings", nargs="+")
    args = parser.parse_args()
    for path in args.listings:
        report(path, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
