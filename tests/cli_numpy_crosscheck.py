#!/usr/bin/env python3
"""Cross-checks the `vkflash` CLI against an independent NumPy float64 attention.

The C++ tests compare with tools/host/reference_attention.cc; this script shares no code with
it: NumPy writes the .npy files, computes attention and its gradients its own way (with masks
and matrix products), and reads vkflash's outputs back. Usage: cli_numpy_crosscheck.py VKFLASH
"""
import os
import subprocess
import sys
import tempfile

import numpy as np


def attention(q, k, v, causal, scale, softcap=0.0, slopes=None, sinks=None, window=(-1, -1), mask=None):
    """O, LSE and a function for the gradients, float64, bottom-right causal alignment. Score
    variants in the contract's order: softcap, ALiBi (slopes [Hq] or [B, Hq]), the mask (a bias
    that broadcasts to [B, Hq, Nq, Nk], -inf blocking, or a bool array, False blocking), the band;
    sinks ([Hq]) join each row's denominator. The gradients function also returns dsinks and the
    bias's gradient (the mask's shape)."""
    b, hq, hkv = q.shape[0], q.shape[1], k.shape[1]
    k = np.repeat(k, hq // hkv, axis=1)
    v = np.repeat(v, hq // hkv, axis=1)
    nq, nk = q.shape[2], k.shape[2]
    s = scale * q @ k.transpose(0, 1, 3, 2)
    t = None
    if softcap > 0:
        t = np.tanh(s / softcap)
        s = softcap * t
    rows, keys = np.arange(nq)[:, None] + (nk - nq), np.arange(nk)[None, :]
    if slopes is not None:
        s = s - np.asarray(slopes, np.float64).reshape(-1 if slopes.ndim == 2 else 1, hq, 1, 1) * np.abs(rows - keys)
    visible = np.ones((b, hq, nq, nk), dtype=bool)
    if mask is not None and mask.dtype == bool:
        visible &= np.broadcast_to(mask, visible.shape)
    elif mask is not None:
        bias = np.broadcast_to(mask.astype(np.float64), visible.shape)
        visible &= bias != -np.inf
        s = s + np.where(bias == -np.inf, 0.0, bias)
    left, right = window[0], 0 if causal else window[1]
    if left >= 0:
        visible &= keys >= rows - left
    if right >= 0:
        visible &= keys <= rows + right
    s = np.where(visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    sink = None if sinks is None else np.broadcast_to(np.asarray(sinks, np.float64).reshape(1, hq, 1, 1), m.shape)
    if sink is not None:
        m = np.maximum(m, sink)
    no_key = ~np.isfinite(m)
    p = np.where(no_key, 0.0, np.exp(s - np.where(no_key, 0.0, m)))
    l = p.sum(axis=-1, keepdims=True)
    if sink is not None:
        l = l + np.where(no_key, 0.0, np.exp(sink - np.where(no_key, 0.0, m)))
    p = p / np.where(l > 0, l, 1.0)
    o = p @ v
    lse = np.where(no_key, -np.inf, m + np.log(np.where(l > 0, l, 1.0)))
    p_sink = None if sink is None else np.where(no_key, 0.0, np.exp(sink - np.where(no_key, 0.0, lse)))
    lse = lse[..., 0]

    def grads(do):
        dv = p.transpose(0, 1, 3, 2) @ do
        dp = do @ v.transpose(0, 1, 3, 2)
        row_dot = (p * dp).sum(axis=-1, keepdims=True)
        ds = p * (dp - row_dot)
        dbias = None
        if mask is not None and mask.dtype != bool:  # summed over the axes the mask broadcasts
            dbias = ds.sum(axis=tuple(range(4 - mask.ndim)))
            dbias = dbias.sum(axis=tuple(i for i in range(mask.ndim) if mask.shape[i] == 1), keepdims=True)
        if t is not None:
            ds = ds * (1 - t * t)
        dq = scale * ds @ k
        dk = scale * ds.transpose(0, 1, 3, 2) @ q
        fold = lambda g: g.reshape(g.shape[0], hkv, hq // hkv, *g.shape[2:]).sum(axis=2)
        dsinks = None if p_sink is None else -(p_sink * row_dot).sum(axis=(0, 2, 3))
        # the magnitudes dsinks sums with signs: docs/design.md measures float16 dsinks against them
        dsinks_terms = None if p_sink is None else np.abs(p_sink * row_dot).sum(axis=(0, 2, 3))
        return dq, fold(dk), fold(dv), dsinks, dsinks_terms, dbias

    return o, lse, grads


def stored_error(a, e, stored_float16):
    """||a - e|| over ||e||; for float16 outputs less the norm of the elements of e below float16's normal
    range (docs/design.md, "Accuracy": such an element may come back as 0 or a subnormal)."""
    diff, norm = np.linalg.norm(a - e), np.linalg.norm(e)
    if stored_float16:
        diff = max(0.0, diff - np.linalg.norm(e[np.abs(e) < 2.0**-14]))
    return diff / norm if norm > 0 else diff


def rel_error(actual, expected):
    stored_float16 = actual.dtype == np.float16
    actual = actual.astype(np.float64)
    if np.isnan(actual).any():
        return np.inf
    both_inf = np.isinf(expected) & (actual == expected)
    if (np.isinf(actual) | np.isinf(expected))[~both_inf].any():
        return np.inf
    return stored_error(actual[~both_inf], expected[~both_inf], stored_float16)


CASES = [  # (B, Hq, Hkv, Nq, Nk, D, dtype, causal, scale)
    (1, 1, 1, 1, 1, 16, np.float32, False, None),
    (2, 4, 2, 37, 53, 64, np.float32, True, None),
    (1, 6, 2, 45, 17, 40, np.float16, True, -0.4),   # Nq > Nk: rows that see no key
    (1, 2, 1, 20, 70, 128, np.float16, False, 0.05),
    (1, 3, 3, 11, 11, 5, np.float32, True, 1.3),
    (2, 2, 2, 9, 30, 256, np.float16, True, None),
    (1, 8, 1, 64, 64, 96, np.float32, False, None),  # MQA
    (1, 4, 2, 150, 170, 64, np.float16, True, None),  # tensor-core tiles: several, with tails
]


def report(label, checks, path):
    """Compares each (what, file, expected, tolerance, dtype[, norm]) output: the relative error, or the
    error over `norm` where one is given. Prints a line each, returns the failures."""
    failures = 0
    for what, file, expected, tol, out_dtype, *norm in checks:
        got = np.load(path(file))
        err = rel_error(got, expected) if not norm else np.linalg.norm(got.astype(np.float64) - expected) / max(norm[0], 1e-300)
        ok = got.dtype == out_dtype and got.shape == expected.shape and err <= tol
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label}: {what} relative error {err:.2e} (tolerance {tol:.0e})")
    return failures


def check_sequences(vkflash, path, rng):
    """Ragged queries and keys ([total, H, D], --cu-seqlens-q/-k) with per-sequence KV lengths
    (--seqlens-k), causal: each sequence against NumPy alone; dK, dV zero past each length.
    Returns the number of failed checks."""
    cq, ck, lens = [0, 5, 5, 12], [0, 9, 13, 19], [9, 2, 3]
    hq, hkv, d = 4, 2, 16
    arrays = {"q": rng.standard_normal((12, hq, d)), "k": rng.standard_normal((19, hkv, d)),
              "v": rng.standard_normal((19, hkv, d)), "do": rng.standard_normal((12, hq, d))}
    arrays = {name: a.astype(np.float32) for name, a in arrays.items()}
    for name, a in (*arrays.items(), ("cq", np.array(cq, np.int32)), ("ck", np.array(ck, np.int32)),
                    ("lens", np.array(lens, np.int32))):
        np.save(path(name + ".npy"), a)
    flags = ["--causal", "--cu-seqlens-q", path("cq.npy"), "--cu-seqlens-k", path("ck.npy"), "--seqlens-k", path("lens.npy")]
    io = ["--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy")]
    for command in (["forward", *io, "--out", path("o.npy"), "--lse", path("lse.npy"), *flags],
                    ["backward", *io, "--do", path("do.npy"), "--dq", path("dq.npy"), "--dk", path("dk.npy"),
                     "--dv", path("dv.npy"), *flags]):
        run = subprocess.run([vkflash, *command], capture_output=True, text=True)
        if run.returncode != 0 or run.stderr:
            print(f"FAIL vkflash {' '.join(command)}: exit {run.returncode}\n{run.stderr}")
            return 1
    got = {name: np.load(path(name + ".npy")) for name in ("o", "lse", "dq", "dk", "dv")}
    failures = 0
    heads_first = lambda a: a.transpose(1, 0, 2)[None].astype(np.float64)
    for b in range(3):
        rows, keys = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b] + lens[b])
        o, lse, grads = attention(heads_first(arrays["q"][rows]), heads_first(arrays["k"][keys]),
                                  heads_first(arrays["v"][keys]), True, d ** -0.5)
        dq, dk, dv, _, _, _ = grads(heads_first(arrays["do"][rows]))
        back = lambda x: x[0].transpose(1, 0, 2)
        unused = slice(ck[b] + lens[b], ck[b + 1])
        checks = [("O", rel_error(got["o"][rows], back(o)), 2e-4), ("LSE", rel_error(got["lse"][:, rows], lse[0]), 2e-4),
                  ("dQ", rel_error(got["dq"][rows], back(dq)), 5e-4), ("dK", rel_error(got["dk"][keys], back(dk)), 5e-4),
                  ("dV", rel_error(got["dv"][keys], back(dv)), 5e-4),
                  ("dK, dV past the length", float(np.abs(got["dk"][unused]).max(initial=0) +
                                                   np.abs(got["dv"][unused]).max(initial=0)), 0.0)]
        for what, err, tol in checks:
            ok = err <= tol
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} varlen sequence {b}: {what} error {err:.2e} (tolerance {tol:.0e})")
    return failures


def run_forward_and_backward(vkflash, path, io, flags, extra_outputs):
    """`vkflash forward` (o.npy, lse.npy) and `backward` (dq/dk/dv.npy and `extra_outputs`) with
    `flags`; False (and a line) where either fails or prints anything on stderr."""
    for command in (["forward", *io, "--out", path("o.npy"), "--lse", path("lse.npy"), *flags],
                    ["backward", *io, "--do", path("do.npy"), "--dq", path("dq.npy"), "--dk", path("dk.npy"),
                     "--dv", path("dv.npy"), *extra_outputs, *flags]):
        run = subprocess.run([vkflash, *command], capture_output=True, text=True)
        if run.returncode != 0 or run.stderr:
            print(f"FAIL vkflash {' '.join(command)}: exit {run.returncode}\n{run.stderr}")
            return False
    return True


SCORE_CASES = [  # (B, Hq, Hkv, Nq, Nk, D, dtype, causal, window, softcap, slopes shape, sinks)
    (2, 4, 2, 23, 41, 32, np.float32, True, (-1, -1), 5.0, "head", True),
    (2, 4, 4, 30, 12, 64, np.float16, True, (6, -1), 0.0, "batch", True),  # Nq > Nk: rows see only the sink
    (1, 6, 2, 17, 29, 40, np.float32, False, (4, 3), 0.7, None, False),
    (1, 8, 2, 1, 300, 64, np.float16, False, (-1, -1), 30.0, "head", True),  # decode-shaped
]


def check_score_variants(vkflash, path, rng):
    """--softcap, --alibi (slopes [Hq] and [B, Hq]) and --sinks with --dsinks against NumPy.
    Returns the number of failed checks."""
    failures = 0
    for b, hq, hkv, nq, nk, d, dtype, causal, window, softcap, slopes_shape, with_sinks in SCORE_CASES:
        q, do = (rng.standard_normal((b, hq, nq, d)).astype(dtype) for _ in range(2))
        k, v = (rng.standard_normal((b, hkv, nk, d)).astype(dtype) for _ in range(2))
        slopes = None if slopes_shape is None else \
            (rng.random(hq if slopes_shape == "head" else (b, hq)) * 0.3).astype(np.float32)
        sinks = (rng.standard_normal(hq) + np.log(nk)).astype(np.float32) if with_sinks else None
        flags = (["--causal"] if causal else []) + (["--window", f"{window[0]},{window[1]}"] if window != (-1, -1) else [])
        flags += ["--softcap", str(softcap)] if softcap else []
        for name, array in (("q", q), ("k", k), ("v", v), ("do", do), ("slopes", slopes), ("sinks", sinks)):
            if array is not None:
                np.save(path(name + ".npy"), array)
                if name in ("slopes", "sinks"):
                    flags += ["--alibi" if name == "slopes" else "--sinks", path(name + ".npy")]
        io = ["--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy")]
        dsinks_out = ["--dsinks", path("dsinks.npy")] if with_sinks else []
        if not run_forward_and_backward(vkflash, path, io, flags, dsinks_out):
            return 1
        o, lse, grads = attention(*(x.astype(np.float64) for x in (q, k, v)), causal, d ** -0.5, softcap, slopes, sinks,
                                  window)
        dq, dk, dv, dsinks, dsinks_terms, _ = grads(do.astype(np.float64))
        fwd_tol, bwd_tol = (2e-4, 5e-4) if dtype == np.float32 else (5e-3, 1e-2)
        checks = [("O", "o.npy", o, fwd_tol, dtype), ("LSE", "lse.npy", lse, fwd_tol, np.float32),
                  ("dQ", "dq.npy", dq, bwd_tol, dtype), ("dK", "dk.npy", dk, bwd_tol, dtype),
                  ("dV", "dv.npy", dv, bwd_tol, dtype)]
        if with_sinks:
            # float16: against the norm of its terms' magnitudes, which cancel (docs/design.md, "Accuracy")
            norm = () if dtype == np.float32 else (np.linalg.norm(dsinks_terms),)
            checks.append(("dSinks", "dsinks.npy", dsinks, bwd_tol, np.float32, *norm))
        label = f"B={b} Hq={hq} Hkv={hkv} Nq={nq} Nk={nk} D={d} {np.dtype(dtype).name}" + (" causal" if causal else "") + \
                (f" window={window[0]},{window[1]}" if window != (-1, -1) else "") + \
                (f" softcap={softcap}" if softcap else "") + (f" alibi[{slopes_shape}]" if slopes_shape else "") + \
                (" sinks" if with_sinks else "")
        failures += report(label, checks, path)
    return failures


MASK_CASES = [  # (B, Hq, Hkv, Nq, Nk, D, dtype, causal, mask shape, mask dtype)
    (2, 4, 2, 23, 41, 32, np.float32, False, (2, 4, 23, 41), np.float32),
    (2, 4, 4, 30, 12, 64, np.float16, True, (30, 12), np.float16),  # [Nq, Nk]; Nq > Nk
    (2, 6, 2, 17, 29, 40, np.float32, False, (2, 1, 1, 29), bool),  # a padding mask
    (1, 8, 2, 1, 300, 64, np.float16, False, (1, 8, 1, 300), np.float32),  # decode-shaped
    (2, 4, 2, 20, 33, 32, np.float32, True, (4, 1, 33), np.float16),  # [Hq, 1, Nk]
]


def check_masks(vkflash, path, rng):
    """--mask (float32, float16 and bool, broadcast as NumPy does) with --dbias against NumPy.
    Returns the number of failed checks."""
    failures = 0
    for b, hq, hkv, nq, nk, d, dtype, causal, mask_shape, mask_dtype in MASK_CASES:
        q, do = (rng.standard_normal((b, hq, nq, d)).astype(dtype) for _ in range(2))
        k, v = (rng.standard_normal((b, hkv, nk, d)).astype(dtype) for _ in range(2))
        blocked = rng.random(mask_shape) < 0.2
        if mask_dtype == bool:
            mask = ~blocked
        else:
            mask = np.where(blocked, -np.inf, rng.standard_normal(mask_shape)).astype(mask_dtype)
        for name, array in (("q", q), ("k", k), ("v", v), ("do", do), ("mask", mask)):
            np.save(path(name + ".npy"), array)
        flags = (["--causal"] if causal else []) + ["--mask", path("mask.npy")]
        io = ["--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy")]
        dbias_out = ["--dbias", path("dbias.npy")] if mask_dtype != bool else []
        if not run_forward_and_backward(vkflash, path, io, flags, dbias_out):
            return 1
        o, lse, grads = attention(*(x.astype(np.float64) for x in (q, k, v)), causal, d ** -0.5, mask=mask)
        dq, dk, dv, _, _, dbias = grads(do.astype(np.float64))
        fwd_tol, bwd_tol = (2e-4, 5e-4) if dtype == np.float32 else (5e-3, 1e-2)
        checks = [("O", "o.npy", o, fwd_tol, dtype), ("LSE", "lse.npy", lse, fwd_tol, np.float32),
                  ("dQ", "dq.npy", dq, bwd_tol, dtype), ("dK", "dk.npy", dk, bwd_tol, dtype),
                  ("dV", "dv.npy", dv, bwd_tol, dtype)]
        if dbias is not None:
            checks.append(("dBias", "dbias.npy", dbias.reshape(mask_shape), bwd_tol, np.float32))
        label = f"B={b} Hq={hq} Hkv={hkv} Nq={nq} Nk={nk} D={d} {np.dtype(dtype).name}" + (" causal" if causal else "") + \
                f" mask={np.dtype(mask_dtype).name}{list(mask_shape)}"
        failures += report(label, checks, path)
    return failures


def main():
    vkflash = sys.argv[1]
    rng = np.random.default_rng(0)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = lambda name: os.path.join(tmp, name)
        for b, hq, hkv, nq, nk, d, dtype, causal, scale in CASES:
            q = rng.standard_normal((b, hq, nq, d)).astype(dtype)
            k = rng.standard_normal((b, hkv, nk, d)).astype(dtype)
            v = rng.standard_normal((b, hkv, nk, d)).astype(dtype)
            do = rng.standard_normal((b, hq, nq, d)).astype(dtype)
            for name, array in (("q", q), ("k", k), ("v", v), ("do", do)):
                np.save(path(name + ".npy"), array)
            flags = (["--causal"] if causal else []) + (["--scale", str(scale)] if scale is not None else [])
            io = ["--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy")]
            # --nondeterministic: dQ summed with float atomics where the device has that kernel
            for command in (["forward", *io, "--out", path("o.npy"), "--lse", path("lse.npy"), *flags],
                            ["backward", *io, "--do", path("do.npy"), "--dq", path("dq.npy"), "--dk", path("dk.npy"),
                             "--dv", path("dv.npy"), *flags],
                            ["backward", *io, "--do", path("do.npy"), "--dq", path("dq_nd.npy"), "--dk",
                             path("dk_nd.npy"), "--dv", path("dv_nd.npy"), "--nondeterministic", *flags]):
                run = subprocess.run([vkflash, *command], capture_output=True, text=True)
                if run.returncode != 0 or run.stderr:  # stderr holds validation messages, if any
                    print(f"FAIL vkflash {' '.join(command)}: exit {run.returncode}\n{run.stderr}")
                    return 1

            o, lse, grads = attention(*(x.astype(np.float64) for x in (q, k, v)), causal,
                                      scale if scale is not None else d ** -0.5)
            dq, dk, dv, _, _, _ = grads(do.astype(np.float64))
            fwd_tol, bwd_tol = (2e-4, 5e-4) if dtype == np.float32 else (5e-3, 1e-2)
            checks = [("O", "o.npy", o, fwd_tol, dtype), ("LSE", "lse.npy", lse, fwd_tol, np.float32),
                      ("dQ", "dq.npy", dq, bwd_tol, dtype), ("dK", "dk.npy", dk, bwd_tol, dtype),
                      ("dV", "dv.npy", dv, bwd_tol, dtype), ("dQ --nondeterministic", "dq_nd.npy", dq, bwd_tol, dtype),
                      ("dK --nondeterministic", "dk_nd.npy", dk, bwd_tol, dtype),
                      ("dV --nondeterministic", "dv_nd.npy", dv, bwd_tol, dtype)]
            label = f"B={b} Hq={hq} Hkv={hkv} Nq={nq} Nk={nk} D={d} {np.dtype(dtype).name}" + \
                    (" causal" if causal else "") + (f" scale={scale}" if scale is not None else "")
            failures += report(label, checks, path)
        failures += check_sequences(vkflash, path, rng)
        failures += check_score_variants(vkflash, path, rng)
        failures += check_masks(vkflash, path, rng)
    checked = len(CASES) * 8 + 18 + sum(5 + case[-1] for case in SCORE_CASES) + \
        sum(5 + (case[-1] is not bool) for case in MASK_CASES)
    print(f"{checked - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
