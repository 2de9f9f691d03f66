#!/usr/bin/env python3
"""Disassembles the shaders NVIDIA's Vulkan driver compiled, from its shader disk cache.

The driver decides how a cooperative matrix is split over subgroups, which instructions a copy
becomes and where it spills; its machine code shows it. Run vkflash with the cache pointed at an
empty folder, then this script over that folder:

    export __GL_SHADER_DISK_CACHE_PATH=/tmp/glcache __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
    build-gpu/vkflash bench --kernel coopmat2 --runs 1 --n 512 --no-naive
    python3 tools/lab/dump_sass.py /tmp/glcache OUT_DIR [--nvdisasm PATH] [--zstd PATH] [--hex]

It writes OUT_DIR/shader<k>_hmma<count>.sass for every compiled shader with tensor-core
instructions (the count of HMMA instructions tells the kernels apart), or with --all for every
shader (the scalar kernels have none), and prints, per shader, its instruction count, HMMA count
and BAR.SYNC (workgroup barrier) count. With --hex the listings also
carry each instruction's encoding, whose control bits tools/lab/sass_loop.py reads (which loads
are waited for where).

What it relies on (observed with driver 580.159 on the H100, not documented by NVIDIA): the cache's
.bin files hold zstd frames; a frame that decompresses to an "NVDANVVM" container has a section
table at byte 0x48 whose first entry is (type, size, offset) of the code, which starts 8 bytes
after that offset. nvdisasm comes with the CUDA toolkit (and with Triton's wheels); zstd is the
command-line tool. Both only run here, on the GPU machine; nothing of this is part of the library.
"""
import argparse
import glob
import os
import struct
import subprocess
import sys
import tempfile

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def zstd_frames(data):
    """Byte ranges that start with the zstd magic, each up to the next one."""
    starts, at = [], data.find(ZSTD_MAGIC)
    while at >= 0:
        starts.append(at)
        at = data.find(ZSTD_MAGIC, at + 1)
    return [data[s:e] for s, e in zip(starts, starts[1:] + [len(data)])]


def code_of(container):
    """The machine code of an NVDANVVM container, cut to whole 16-byte instructions."""
    _, size, offset = struct.unpack_from("<III", container, 0x48)
    code = container[offset + 8:offset + size]
    return code[:len(code) // 16 * 16]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--nvdisasm", default="/usr/local/cuda/bin/nvdisasm")
    parser.add_argument("--zstd", default="zstd")
    parser.add_argument("--arch", default="SM90", help="nvdisasm -b value (SM90: Hopper)")
    parser.add_argument("--hex", action="store_true", help="keep each instruction's encoding (nvdisasm -hex)")
    parser.add_argument("--all", action="store_true", help="also shaders without tensor-core instructions")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)

    shader = 0
    for path in sorted(glob.glob(os.path.join(args.cache_dir, "**", "*.bin"), recursive=True)):
        with open(path, "rb") as f:
            data = f.read()
        for frame in zstd_frames(data):
            unpacked = subprocess.run([args.zstd, "-d", "-c"], input=frame, capture_output=True).stdout
            if not unpacked.startswith(b"NVDANVVM"):
                continue  # a frame cut short by a false magic, or not a shader
            with tempfile.NamedTemporaryFile(suffix=".bin") as code:
                code.write(code_of(unpacked))
                code.flush()
                command = [args.nvdisasm, *(["-hex"] if args.hex else []), "-b", args.arch, code.name]
                listing = subprocess.run(command, capture_output=True, text=True)
            if listing.returncode != 0:
                print(f"{path}: nvdisasm failed: {listing.stderr.strip()[:200]}", file=sys.stderr)
                continue
            text = listing.stdout
            hmma = text.count("HMMA")
            if hmma == 0 and not args.all:
                continue
            name = os.path.join(args.out_dir, f"shader{shader}_hmma{hmma}.sass")
            with open(name, "w") as f:
                f.write(text)
            instructions = sum(1 for line in text.splitlines() if line.strip().startswith("/*") and ";" in line)
            print(f"{name}: {instructions} instructions, {hmma} HMMA, {text.count('BAR.SYNC')} BAR.SYNC")
            shader += 1
    if shader == 0:
        print("no shader found" if args.all else "no shader with tensor-core instructions found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
