#!/usr/bin/env python3
"""A seeded fuzz of the `vkflash` CLI's .npy reader, with NumPy's own loader as the oracle.

Each case mutates a valid Q file (its header bytes, its text, its length field, its size, or its
data) and runs `vkflash forward` on it with valid K and V. Whatever the file holds, vkflash must
exit 0 with outputs that match NumPy attention on what np.load reads, or exit 2 with one line on
stderr and no output file; never crash, hang, or write a partial result. When np.load reads a
float32/float16 array that fits the call, vkflash must succeed on it.
With `grammar` instead of a case count it runs a fixed list of headers instead, which probe Python's
literal grammar (string prefixes and escapes, number forms, signs, the long suffix, nesting).
Usage: npy_fuzz.py VKFLASH [CASES | grammar] [SEED]   (VKFLASH_FUZZ_KEEP=DIR keeps failing files)
"""
import ast
import io
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

from cli_numpy_crosscheck import stored_error

QSHAPE, KSHAPE = (1, 2, 16, 32), (1, 2, 24, 32)
TOKENS = ["'<f8'", "'>f4'", "'<f2'", "'=f4'", "'f4'", "True", "False", "None", "(2, 2)", "(1, 2, 16, 32)",
          "(1, 1, 32, 32)", "(2, 1, 16, 32)", "(1,)", "()", "[]", "{}", "}", "{", "'", '"', "#", "\\", "L", "_",
          "-1", "1e3", "0x10", ",", ":", "'shape'", "'descr'", "'fortran_order'", "\xc3\xa9", "\xff", "\x00",
          "'note': \"'shape': (1, 1, 32, 32)\", ", "'shape': (1, 2, 16, 32), ", " " * 70]


def npy_bytes(array, version=None):
    buffer = io.BytesIO()
    if version is None:
        np.save(buffer, array)
    else:
        np.lib.format.write_array(buffer, array, version=version)
    return bytearray(buffer.getvalue())


def header_end(data):
    """Byte offset where the data begins in a well-formed file."""
    length_bytes = 2 if data[6] == 1 else 4
    return 8 + length_bytes + int.from_bytes(data[8:8 + length_bytes], "little")


def mutate(data, rng):
    data = bytearray(data)
    end = header_end(data)
    kind = rng.randrange(9)
    if kind == 0:  # flip bytes in the header
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(end)] = rng.randrange(256)
    elif kind == 1:  # replace a span of the header text with a token, keeping the length field right
        start = rng.randrange(10, end - 1)
        stop = min(end - 1, start + rng.randint(0, 12))
        token = rng.choice(TOKENS).encode("latin-1")
        body = bytes(data[10:start]) + token + bytes(data[stop:end])
        body = body[:65535]
        data = bytearray(data[:8]) + len(body).to_bytes(2, "little") + body + data[end:]
    elif kind == 2:  # a wrong header length
        data[8:10] = rng.randrange(65536).to_bytes(2, "little")
    elif kind == 3:  # truncate anywhere
        data = data[:rng.randrange(len(data))]
    elif kind == 4:  # extra bytes at the end
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
    elif kind == 5:  # another format version
        data[6] = rng.choice([0, 2, 3, 4, 255])
    elif kind == 6:  # data bytes (values, possibly inf / NaN)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(end, len(data))] = rng.randrange(256)
    elif kind == 7:  # insert or delete a byte inside the header
        at = rng.randrange(10, end)
        if rng.random() < 0.5:
            data.insert(at, rng.randrange(32, 127))
        else:
            del data[at]
    else:  # the header rewritten as NumPy would write it, then one token swapped in
        text = data[10:end].decode("latin-1")
        swaps = [("'descr'", '"descr"'), ("False", "True"), ("(1, 2, 16, 32)", "(1, 1, 32, 32)"),
                 ("(1, 2, 16, 32)", "(2, 1, 16, 32)"), ("(1, 2, 16, 32)", "(1L, 2L, 16L, 32L)"), (", }", "}"),
                 ("'<f4'", "'=f4'"), ("'<f2'", "'e'"), ("{", "{'shape': (1,), "), ("}", "} x")]
        old, new = rng.choice(swaps)
        text = text.replace(old, new, 1)
        body = text.encode("latin-1")
        data = bytearray(data[:8]) + len(body).to_bytes(2, "little") + body + data[end:]
    return bytes(data)


def numpy_attention(q, k, v):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    v = np.repeat(v, q.shape[1] // v.shape[1], axis=1)
    with np.errstate(all="ignore"):
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
        m = s.max(axis=-1, keepdims=True)
        p = np.exp(s - m)
        l = p.sum(axis=-1, keepdims=True)
        return (p / l) @ v, (m + np.log(l))[..., 0]


def float32_overflow_rows(q, k):
    """Query rows whose scores (or their partial sums) may not fit float32, the kernels' arithmetic:
    vkflash may give them non-finite outputs where float64 does not."""
    q, k = np.abs(q.astype(np.float64)), np.abs(k.astype(np.float64))
    k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    with np.errstate(all="ignore"):
        bound = (q @ k.transpose(0, 1, 3, 2)).max(axis=-1, initial=0.0)
    return ~(bound < 1e37)


def close(got, expected, tolerance, may_overflow):
    """Per query row: NaN where the reference is NaN (a row whose scores hold NaN); finite and within
    tolerance (over all such rows together) where it is finite, except that rows with float32
    overflow may be non-finite. Float16 outputs as cli_numpy_crosscheck's stored_error."""
    stored_float16 = got.dtype == np.float16
    got = got.astype(np.float64)
    rows_of = (lambda x: np.isfinite(x).all(axis=-1)) if expected.ndim == 4 else np.isfinite
    nan_rows = (lambda x: np.isnan(x).all(axis=-1)) if expected.ndim == 4 else np.isnan
    finite_ref, finite_got = rows_of(expected), rows_of(got)
    if (finite_got & ~finite_ref).any():
        return False  # a finite answer where the reference has none
    if (nan_rows(expected) & ~nan_rows(got) & ~may_overflow).any():
        return False  # the NaN rule: never an inf or the values of an empty row instead
    if (~finite_got & finite_ref & ~may_overflow).any():
        return False
    checked = finite_ref & finite_got
    return stored_error(got[checked], expected[checked], stored_float16) <= tolerance


def numpy_lenient(path):
    """True for headers NumPy loads but vkflash refuses on purpose: a key named twice (NumPy keeps
    the last silently), a negative dimension (NumPy's read_array lets one stand for "the rest") and a
    \\N{name} escape (Python looks the name up in its Unicode database; vkflash has none)."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            length_bytes = 2 if version[0] == 1 else 4
            length = int.from_bytes(f.read(length_bytes), "little")
            text = f.read(length).decode("utf-8" if version[0] >= 3 else "latin-1")
        if "\\N{" in text:
            return True
        tree = ast.parse(text.strip(), mode="eval").body
        keys = [k.value for k in tree.keys if isinstance(k, ast.Constant)]
        shape = ast.literal_eval(tree)["shape"]
        return len(keys) != len(set(keys)) or any(d < 0 for d in shape)
    except Exception:
        return False


def expected_array(path, k):
    """The array vkflash must accept, or None when it must refuse the file."""
    try:
        q = np.load(path, allow_pickle=False)
    except Exception:
        return None
    if numpy_lenient(path):
        return None
    if q.dtype not in (np.float32, np.float16) or q.dtype.byteorder == ">" or q.dtype != k.dtype or q.ndim != 4:
        return None
    if not (q.flags.c_contiguous or q.size <= 1 or sum(d > 1 for d in q.shape) <= 1):
        return None
    b, hq, nq, d = q.shape
    if b != k.shape[0] or d != k.shape[3] or hq == 0 or hq % k.shape[1] != 0:
        return None
    return q


def header_file(text, version, data):
    """A .npy file of format `version` whose header is `text` (padded as NumPy pads it) and whose
    data bytes are `data`."""
    body = text.encode("utf-8" if version >= 3 else "latin-1")
    length_bytes = 2 if version == 1 else 4
    body += b" " * ((-(8 + length_bytes + len(body) + 1)) % 64) + b"\n"
    return b"\x93NUMPY" + bytes([version, 0]) + len(body).to_bytes(length_bytes, "little") + body + data


def grammar_cases(q):
    """Headers for `q` that probe Python's literal grammar (string prefixes, escapes, number forms,
    signs, the long suffix, nesting, comments), each in format versions 1 and 3."""
    shape = str(tuple(q.shape))
    descr = np.lib.format.dtype_to_descr(q.dtype)  # e.g. <f4
    order, code = descr[0], descr[1:]
    dims = shape[1:-1]
    first, rest = dims.split(",", 1)
    n = int(first)
    template = "{'descr': %s, 'fortran_order': False, 'shape': %s}"
    descrs = [p + "'%s'" % descr for p in ("u", "U", "r", "R", "b", "rb", "f", "Ur")]
    descrs += ['"""%s"""' % descr, "'''%s'''" % descr, "'''%s\n'''" % descr, "'''%s'x'''" % descr,
               "'\\x3c%s'" % code, "'\\074%s'" % code, "'\\u003c%s'" % code, "'\\U0000003c%s'" % code,
               "'\\N{LESS-THAN SIGN}%s'" % code, "'\\x3%s'" % code, "'\\a%s'" % descr, "'%s\\q'" % descr,
               "'%s\\\n'" % descr, "r'%s\\\n'" % descr, "'%s\\\nx'" % descr, "'%s' '%s'" % (order, code),
               "r'%s' u'%s'" % (order, code), "'%s' \"%s\"" % (order, code)]
    shapes = ["(0x%x,%s)" % (n, rest), "(0X%x,%s)" % (n, rest), "(0o%o,%s)" % (n, rest),
              "(0b%s,%s)" % (bin(n)[2:], rest), "(0x_%x,%s)" % (n, rest), "(%sL,%s)" % (first, rest),
              "(%s L,%s)" % (first, rest), "(%sl,%s)" % (first, rest), "(%s\\\nL,%s)" % (first, rest),
              "(%s\nL,%s)" % (first, rest), "(0x%xL,%s)" % (n, rest), "(%s Lx,%s)" % (first, rest),
              "(+%s,%s)" % (first, rest), "(- %s,%s)" % (first, rest), "(--%s,%s)" % (first, rest),
              "(-+%s,%s)" % (first, rest), "(+True,%s)" % rest, "(True,%s)" % rest, "(-0,%s)" % rest,
              "(0%s,%s)" % (first, rest), "(00,%s)" % rest, "(0_0,%s)" % rest, "(0x,%s)" % rest,
              "(%s__0,%s)" % (first, rest), "(%s.0,%s)" % (first, rest), "(1+%d,%s)" % (n - 1, rest),
              "[%s]" % dims, "(%s,\n)" % dims, "(%s, # c\n)" % dims, "(%s,\\\n)" % dims, "(%s,,)" % dims,
              "(" * 198 + shape + ")" * 198, "(" * 199 + shape + ")" * 199]
    plain = template % ("'%s'" % descr, shape)
    texts = [template % (d, shape) for d in descrs] + [template % ("'%s'" % descr, s) for s in shapes]
    texts += [" " + plain, "\t" + plain, "#c\n" + plain, plain + " # c", plain + "\\\n", plain + "\f", plain + ";"]
    return [(text, version) for text in texts for version in (1, 3)]


def check_file(vkflash, env, path, data, name, k, v):
    """Runs `vkflash forward` on `data` as Q; returns (accepted, problem or None, stderr)."""
    with open(path("q.npy"), "wb") as f:
        f.write(data)
    for out in ("o.npy", "lse.npy"):
        if os.path.exists(path(out)):
            os.remove(path(out))
    command = [vkflash, "forward", "--q", path("q.npy"), "--k", path(f"k_{name}.npy"), "--v",
               path(f"v_{name}.npy"), "--out", path("o.npy"), "--lse", path("lse.npy")]
    try:
        run = subprocess.run(command, capture_output=True, text=True, errors="backslashreplace", env=env,
                             timeout=120)
    except subprocess.TimeoutExpired:
        return False, "vkflash did not finish", ""
    q = expected_array(path("q.npy"), k)
    if run.returncode == 0:
        if q is None:
            return True, "accepted a file NumPy refuses (or that does not fit the call)", run.stderr
        o, lse = numpy_attention(q, k, v)
        tolerance = 2e-4 if q.dtype == np.float32 else 5e-3
        got_o, got_lse = np.load(path("o.npy")), np.load(path("lse.npy"))
        overflow = float32_overflow_rows(q, k)
        if (got_o.shape != o.shape or not close(got_o, o, tolerance, overflow) or
                not close(got_lse, lse, tolerance, overflow)):
            return True, "wrong outputs", run.stderr
        return True, None, run.stderr
    if run.returncode == 2:
        lines = run.stderr.splitlines()
        if len(lines) != 1 or not lines[0].startswith("vkflash: error: "):
            return False, "exit 2 without exactly one error line", run.stderr
        if os.path.exists(path("o.npy")) or os.path.exists(path("lse.npy")):
            return False, "exit 2 but an output was written", run.stderr
        if q is not None:
            return False, "refused a file NumPy reads as a usable float array: " + lines[0], run.stderr
        return False, None, run.stderr
    return False, f"exit {run.returncode}", run.stderr


def main():
    vkflash = sys.argv[1]
    grammar = len(sys.argv) > 2 and sys.argv[2] == "grammar"
    cases = 0 if grammar else int(sys.argv[2]) if len(sys.argv) > 2 else 300
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    np_rng = np.random.default_rng(0)
    env = dict(os.environ, VKFLASH_VALIDATION="1")
    failures = accepted = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = lambda name: os.path.join(tmp, name)
        bases = {}
        for dtype in (np.float32, np.float16):
            q = np_rng.standard_normal(QSHAPE).astype(dtype)
            k = np_rng.standard_normal(KSHAPE).astype(dtype)
            v = np_rng.standard_normal(KSHAPE).astype(dtype)
            name = np.dtype(dtype).name
            np.save(path(f"k_{name}.npy"), k)
            np.save(path(f"v_{name}.npy"), v)
            bases[name] = (q, k, v, [npy_bytes(q), npy_bytes(q, (2, 0)), npy_bytes(q, (3, 0))])
        if grammar:
            q = bases["float32"][0]
            work = [("float32", header_file(text, version, q.tobytes())) for text, version in grammar_cases(q)]
        else:
            work = []
            for _ in range(cases):
                name = rng.choice(sorted(bases))
                work.append((name, mutate(rng.choice(bases[name][3]), rng)))
        for case, (name, data) in enumerate(work):
            _, k, v, _ = bases[name]
            was_accepted, problem, stderr = check_file(vkflash, env, path, data, name, k, v)
            total += 1
            accepted += was_accepted
            if problem:
                if os.environ.get("VKFLASH_FUZZ_KEEP"):
                    with open(os.path.join(os.environ["VKFLASH_FUZZ_KEEP"], f"case{case}_{name}.npy"), "wb") as f:
                        f.write(data)
                failures += 1
                print(f"FAIL case {case} ({name}): {problem}\n  header: {bytes(data[:160])!r}\n  stderr: {stderr.strip()}")
    what = "grammar headers" if grammar else "mutated files"
    print(f"{total} {what}: {accepted} accepted and checked, {total - accepted} refused; {failures} failures")
    return 1 if failures or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
