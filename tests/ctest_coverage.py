#!/usr/bin/env python3
"""Every Catch2 test case runs in exactly one CTest test, and every CTest test of the Catch2 binary
runs at least one case (and is told to fail when it runs none: `--warn NoTests`).

CMake splits test names at ';', so a Catch2 case named "a; b" once became two CTest tests that each
ran nothing and passed. This check would have failed on it.
Usage: ctest_coverage.py CTEST BUILD_DIR CATCH2_BINARY
"""
import json
import subprocess
import sys


def case_names(binary, spec):
    run = subprocess.run([binary, *spec, "--list-test-names-only"], capture_output=True, text=True)
    return [line.strip() for line in run.stdout.splitlines() if line.strip()]


def main():
    ctest, build_dir, binary = sys.argv[1:4]
    everything = case_names(binary, [])
    listing = subprocess.run([ctest, "--show-only=json-v1"], cwd=build_dir, capture_output=True, text=True, check=True)
    tests = [t for t in json.loads(listing.stdout)["tests"] if t.get("command", [None])[0] == binary]
    problems = []
    runs = {name: [] for name in everything}
    for test in tests:
        args = test["command"][1:]
        if "--warn" not in args or args[args.index("--warn") + 1] != "NoTests":
            problems.append(f"CTest test '{test['name']}' does not pass --warn NoTests (it could run nothing and pass)")
        spec = [a for i, a in enumerate(args) if a != "--warn" and (i == 0 or args[i - 1] != "--warn")]
        matched = case_names(binary, spec)
        if not matched:
            problems.append(f"CTest test '{test['name']}' runs no Catch2 case")
        for name in matched:
            runs.setdefault(name, []).append(test["name"])
    for name, by in runs.items():
        if len(by) != 1:
            problems.append(f"Catch2 case '{name}' runs in {len(by)} CTest tests: {by}")
    print(f"{len(everything)} Catch2 cases, {len(tests)} CTest tests of {binary}")
    for p in problems:
        print("FAIL", p)
    if not everything or not tests:
        print("FAIL: nothing to check")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
