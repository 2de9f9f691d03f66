#!/usr/bin/env python3
"""Plots `vkflash bench --json` rows beside PyTorch's (`sdpa_bench.py` JSON) as an SVG, and prints
a Markdown table. Standard library only.

Usage: plot_bench.py VKFLASH.json PYTORCH.json OUT.svg [--table-n 4096]
"""
import json
import math
import sys

SERIES = [  # (label, colour, source, key or (mode, kernel-prefix))
    ("vkflash fwd", "#e8590c", "vk", ("fwd", "forward")),
    ("vkflash bwd", "#f59f00", "vk", ("bwd", "backward")),
    ("vkflash naive fwd", "#adb5bd", "vk", ("fwd", "naive")),
    ("PyTorch flash fwd", "#1c7ed6", "pt", "flash_fwd_tflops"),
    ("PyTorch flash bwd", "#74c0fc", "pt", "flash_bwd_tflops"),
    ("cuDNN fwd", "#2b8a3e", "pt", "cudnn_fwd_tflops"),
    ("PyTorch naive fwd", "#868e96", "pt", "naive_fwd_tflops"),
]


def value(rows_vk, rows_pt, source, key, d, n, causal):
    if source == "vk":
        mode, prefix = key
        for r in rows_vk:
            if (r["D"], r["N"], r["causal"], r["mode"]) == (d, n, causal, mode) and r["kernel"].startswith(prefix):
                return r["tflops"]
        return None
    for r in rows_pt:
        if (r["D"], r["N"], r["causal"]) == (d, n, causal):
            return r.get(key)
    return None


def svg(rows_vk, rows_pt, device):
    ns = sorted({r["N"] for r in rows_vk})
    w, h, pad = 460, 300, 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{2 * h + 70}" font-family="sans-serif" font-size="11">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="18" font-size="14">vkflash vs PyTorch, TFLOP/s (log scale), fp16, {device}, B*N = 16k tokens, H*D = 2048</text>']
    lo, hi = 0.05, 1000.0
    for panel, (d, causal) in enumerate([(64, False), (128, False), (64, True), (128, True)]):
        ox, oy = (panel % 2) * w, 30 + (panel // 2) * h
        x = lambda n: ox + pad + (math.log2(n) - math.log2(ns[0])) / max(math.log2(ns[-1] / ns[0]), 1) * (w - 2 * pad)
        y = lambda t: oy + h - pad - (math.log10(t) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (h - 2 * pad)
        out.append(f'<text x="{ox + pad}" y="{oy + 14}" font-size="12">D={d}{", causal" if causal else ""}</text>')
        for t in (0.1, 1, 10, 100, 1000):
            out.append(f'<line x1="{ox + pad}" x2="{ox + w - pad}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{ox + pad - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
        for n in ns:
            out.append(f'<text x="{x(n):.1f}" y="{oy + h - pad + 14}" text-anchor="middle">{n}</text>')
        for label, colour, source, key in SERIES:
            points = [(x(n), y(v)) for n in ns if (v := value(rows_vk, rows_pt, source, key, d, n, causal))]
            if len(points) > 1:
                path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
                out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
    for i, (label, colour, _, _) in enumerate(SERIES):
        lx, ly = 10 + (i % 4) * 220, 2 * h + 42 + (i // 4) * 16
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="12" height="4" fill="{colour}"/><text x="{lx + 18}" y="{ly - 4}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)


def table(rows_vk, rows_pt, n):
    lines = ["| D | causal | vkflash fwd | vkflash bwd | vkflash naive fwd | PyTorch flash fwd | bwd | cuDNN fwd | bwd | PyTorch naive fwd |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for d in (64, 128):
        for causal in (False, True):
            cells = [value(rows_vk, rows_pt, "vk", ("fwd", "forward"), d, n, causal),
                     value(rows_vk, rows_pt, "vk", ("bwd", "backward"), d, n, causal),
                     value(rows_vk, rows_pt, "vk", ("fwd", "naive"), d, n, causal)] + \
                    [value(rows_vk, rows_pt, "pt", k, d, n, causal) for k in
                     ("flash_fwd_tflops", "flash_bwd_tflops", "cudnn_fwd_tflops", "cudnn_bwd_tflops", "naive_fwd_tflops")]
            text = [f"{c:.1f}" if isinstance(c, (int, float)) else "-" for c in cells]
            lines.append(f"| {d} | {'yes' if causal else 'no'} | " + " | ".join(text) + " |")
    return "\n".join(lines)


def main():
    rows_vk, rows_pt = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
    n = int(sys.argv[sys.argv.index("--table-n") + 1]) if "--table-n" in sys.argv else 4096
    open(sys.argv[3], "w").write(svg(rows_vk, rows_pt, rows_vk[0]["device"]))
    print(table(rows_vk, rows_pt, n))


if __name__ == "__main__":
    main()
