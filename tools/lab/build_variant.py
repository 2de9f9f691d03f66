#!/usr/bin/env python3
"""Builds a variant of the vkflash CLI with text replaced in its sources, for timing on the GPU machine.

    python3 tools/lab/build_variant.py NAME FILE OLD NEW [FILE OLD NEW ...] [--build-dir build-gpu]

Each OLD must occur exactly once in FILE; OLD "@FILE" replaces the whole file by the file NEW names.
The variant lands in BUILD_DIR/var/NAME/vkflash. The sources are restored afterwards and the
unchanged CLI rebuilt, so that BUILD_DIR/vkflash is the committed code again (shaders are embedded
at build time: a binary left over from a variant would time the variant under the wrong name).
Carry BUILD_DIR to the device run and time the variants beside the unchanged CLI in one run, e.g.

    python3 tools/lab/build_variant.py no_rescale shaders/coopmat2/attention_forward_coopmat2.comp \\
        "    o_acc *= alpha_wide;" ""
    # device: build-gpu/vkflash bench --mode fwd ...; build-gpu/var/no_rescale/vkflash bench --mode fwd ...
"""
import argparse
import os
import shutil
import subprocess
import sys


def build(build_dir):
    subprocess.run(["cmake", "--build", build_dir, "-j3", "--target", "vkflash"], check=True, stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("edits", nargs="+", help="FILE OLD NEW triples")
    parser.add_argument("--build-dir", default="build-gpu")
    args = parser.parse_args()
    if len(args.edits) % 3 != 0:
        parser.error("edits come as FILE OLD NEW triples")

    originals = {}
    try:
        for i in range(0, len(args.edits), 3):
            path, old, new = args.edits[i:i + 3]
            text = open(path).read()
            originals.setdefault(path, text)
            if old == "@FILE":
                text = open(new).read()
            elif text.count(old) != 1:
                sys.exit(f"{path}: the text to replace occurs {text.count(old)} times, not once: {old!r}")
            else:
                text = text.replace(old, new)
            open(path, "w").write(text)
        build(args.build_dir)
        out = os.path.join(args.build_dir, "var", args.name)
        os.makedirs(out, exist_ok=True)
        shutil.copy(os.path.join(args.build_dir, "vkflash"), os.path.join(out, "vkflash"))
        print(f"built {out}/vkflash")
    finally:
        for path, text in originals.items():
            open(path, "w").write(text)
        if originals:
            build(args.build_dir)  # the unchanged CLI again
    return 0


if __name__ == "__main__":
    sys.exit(main())
