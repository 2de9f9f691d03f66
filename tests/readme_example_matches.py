#!/usr/bin/env python3
"""The README's library example must be samples/readme_example/readme_example.cc, byte for byte.

The README shows it as a fenced block right after a line `<!-- readme_example.cc -->`:

    <!-- readme_example.cc -->
    ```cpp
    ...the file's text...
    ```

The fence lines are not compared; everything between them must equal the file. The sample is built
and run by CTest, so the code a reader copies from the README compiles and works.

Usage: readme_example_matches.py [REPO_ROOT]   (default: the folder above this script's)
"""
import difflib
import os
import sys

MARKER = "<!-- readme_example.cc -->"
SAMPLE = os.path.join("samples", "readme_example", "readme_example.cc")


def readme_block(text):
    """The text between the fences after the marker, or an error message."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == MARKER]
    if len(starts) != 1:
        return None, f"README.md has {len(starts)} lines '{MARKER}', expected exactly 1"
    i = starts[0] + 1
    if i >= len(lines) or not lines[i].startswith("```"):
        return None, f"README.md line {i + 1}: expected an opening ``` fence right after '{MARKER}'"
    for j in range(i + 1, len(lines)):
        if lines[j].rstrip("\r\n") == "```":
            return "".join(lines[i + 1:j]), None
    return None, f"README.md: the ``` fence opened at line {i + 1} is never closed"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    try:
        with open(os.path.join(root, "README.md"), encoding="utf-8", newline="") as f:
            readme = f.read()
        with open(os.path.join(root, SAMPLE), encoding="utf-8", newline="") as f:
            sample = f.read()
    except OSError as e:
        print(f"readme_example_matches: {e}", file=sys.stderr)
        return 1
    block, error = readme_block(readme)
    if error:
        print(f"readme_example_matches: {error}", file=sys.stderr)
        return 1
    if block != sample:
        diff = difflib.unified_diff(sample.splitlines(keepends=True), block.splitlines(keepends=True),
                                    fromfile=SAMPLE, tofile="README.md (example block)")
        sys.stderr.write(f"readme_example_matches: the README's example differs from {SAMPLE}:\n")
        sys.stderr.writelines(diff)
        if not sample.endswith("\n"):
            sys.stderr.write(f"({SAMPLE} does not end with a newline; the README block always does)\n")
        return 1
    print(f"README example block equals {SAMPLE} ({len(sample.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
