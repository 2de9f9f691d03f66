#!/usr/bin/env python3
"""The README's library examples must be samples/readme_example/readme_example.cc (C++) and
readme_example.c (C), byte for byte.

The README shows each as a fenced block right after a line naming its file:

    <!-- readme_example.cc -->
    ```cpp
    ...the file's text...
    ```

The fence lines are not compared; everything between them must equal the file. The samples are
built and run by CTest (and again outside the tree by tests/consumers/), so the code a reader
copies from the README compiles and works.

Usage: readme_example_matches.py [REPO_ROOT]   (default: the folder above this script's)
"""
import difflib
import os
import sys

SAMPLES = [os.path.join("samples", "readme_example", name) for name in ("readme_example.cc", "readme_example.c")]


def readme_block(text, marker):
    """The text between the fences after the marker, or an error message."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(starts) != 1:
        return None, f"README.md has {len(starts)} lines '{marker}', expected exactly 1"
    i = starts[0] + 1
    if i >= len(lines) or not lines[i].startswith("```"):
        return None, f"README.md line {i + 1}: expected an opening ``` fence right after '{marker}'"
    for j in range(i + 1, len(lines)):
        if lines[j].rstrip("\r\n") == "```":
            return "".join(lines[i + 1:j]), None
    return None, f"README.md: the ``` fence opened at line {i + 1} is never closed"


def check(readme, root, sample_path):
    """0 where the README's block equals the sample, else 1 (with the difference on stderr)."""
    try:
        with open(os.path.join(root, sample_path), encoding="utf-8", newline="") as f:
            sample = f.read()
    except OSError as e:
        print(f"readme_example_matches: {e}", file=sys.stderr)
        return 1
    block, error = readme_block(readme, f"<!-- {os.path.basename(sample_path)} -->")
    if error:
        print(f"readme_example_matches: {error}", file=sys.stderr)
        return 1
    if block != sample:
        diff = difflib.unified_diff(sample.splitlines(keepends=True), block.splitlines(keepends=True),
                                    fromfile=sample_path, tofile="README.md (example block)")
        sys.stderr.write(f"readme_example_matches: the README's example differs from {sample_path}:\n")
        sys.stderr.writelines(diff)
        if not sample.endswith("\n"):
            sys.stderr.write(f"({sample_path} does not end with a newline; the README block always does)\n")
        return 1
    print(f"README example block equals {sample_path} ({len(sample.splitlines())} lines)")
    return 0


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    try:
        with open(os.path.join(root, "README.md"), encoding="utf-8", newline="") as f:
            readme = f.read()
    except OSError as e:
        print(f"readme_example_matches: {e}", file=sys.stderr)
        return 1
    return max(check(readme, root, sample) for sample in SAMPLES)


if __name__ == "__main__":
    sys.exit(main())
