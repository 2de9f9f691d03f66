#!/usr/bin/env python3
"""Checks a viewer screenshot: a PNG of at least 640x400 that is not blank.

"Not blank" means many distinct colours over the whole image, and structure (several colours and a
spread of brightness) inside the heat-map area at the top left. Standard library only: the PNG is
decoded here (8-bit RGB/RGBA, all five row filters).
Usage: check_screenshot.py FILE.png
"""
import struct
import sys
import zlib


def decode_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                raise ValueError("only 8-bit RGB/RGBA PNGs are supported here")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if kind == 1: line[x] = (line[x] + a) & 255
            elif kind == 2: line[x] = (line[x] + b) & 255
            elif kind == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def main():
    width, height, channels, rows = decode_png(sys.argv[1])
    pixel = lambda x, y: tuple(rows[y][x * channels:x * channels + 3])
    everywhere = {pixel(x, y) for y in range(0, height, 3) for x in range(0, width, 3)}
    heat = [pixel(x, y) for y in range(40, height // 2) for x in range(20, width // 3)]
    brightness = sorted(sum(p) / 3 for p in heat)
    spread = brightness[len(brightness) * 9 // 10] - brightness[len(brightness) // 10]
    checks = [(width >= 640 and height >= 400, f"size {width}x{height} (at least 640x400)"),
              (len(everywhere) >= 200, f"{len(everywhere)} distinct colours in the image (at least 200)"),
              (len(set(heat)) >= 20, f"{len(set(heat))} distinct colours in the heat map area (at least 20)"),
              (spread >= 20, f"brightness spread {spread:.0f} in the heat map area (at least 20)")]
    for ok, what in checks:
        print(("ok   " if ok else "FAIL ") + what)
    failed = sum(not ok for ok, _ in checks)
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
