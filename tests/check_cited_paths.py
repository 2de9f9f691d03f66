#!/usr/bin/env python3
"""Every repository path that the docs and the sources cite must exist.

Scans README.md, docs/*.md, the top-level CMakeLists.txt, .ci/ and every source file under
engine/ include/ shaders/ tools/ tests/ samples/ scripts/ (.cc .h .hpp .comp .glsl .py .sh .md .txt,
CMakeLists.txt) for cited paths:

- tokens that start with a top-level folder of the repository (engine/, include/, shaders/, tools/,
  tests/, docs/, samples/, scripts/, .ci/, .gpu/), with or without an extension;
- other relative paths with a '/' and a known extension (.cc .h .hpp .comp .glsl .py .sh .md .txt
  .json .svg .png .cmake), e.g. a shader's `common/x.glsl` or a C++ `"attention/x.h"`;
- bare file names with a source extension (.cc .h .hpp .comp .glsl .py .sh .md), which must name a
  file somewhere in the repository (the same name, the same case);
- Markdown link targets, resolved from the Markdown file's folder only, as a viewer resolves them;
- `{a,b}` alternatives in a path are expanded and each checked.

A path resolves if it names a file or folder of the repository relative to the repository root, to
the citing file's folder or one of its parents, or to one of the top-level source folders (include
paths: shaders/ for shader #includes, engine/, include/, tools/, tests/). Paths that climb out of the
repository (../ past the root) are reported: they do not exist in a clone. Not checked: URLs, absolute
paths, paths with shell or CMake variables left after substitution, globs (* ?), `...`, paths that
git ignores (build outputs, .gpu/, .tools/), `#include <...>` other than <vkflash/...>, and lines that
contain the marker `check_cited_paths: ignore`.

"Files of the repository" are those git tracks or would track (not ignored) that exist on disk.

Usage: check_cited_paths.py REPO_ROOT        Exit 0: none dangling; 1: a list on stderr.
"""
import os
import re
import subprocess
import sys

TOP = ("engine", "include", "shaders", "tools", "tests", "docs", "samples", "scripts", ".ci", ".gpu")
SCAN_DIRS = ("engine", "include", "shaders", "tools", "tests", "samples", "scripts", ".ci")
SCAN_EXT = (".cc", ".h", ".hpp", ".comp", ".glsl", ".py", ".sh", ".md", ".txt")
PATH_EXT = (".cc", ".h", ".hpp", ".comp", ".glsl", ".py", ".sh", ".md", ".txt", ".json", ".svg", ".png",
            ".cmake")
BARE_EXT = (".cc", ".comp", ".glsl", ".md")  # not .h/.py/.sh: external headers and modules are cited bare
INCLUDE_BASES = ("shaders", "engine", "include", "tools", "tests")
IGNORE_MARKER = "check_cited_paths: ignore"

# A path-like token: path characters, not glued to a preceding path character (so that the tail of
# an absolute path or of a URL is not taken for a relative path).
TOKEN = re.compile(r"(?<![\w./@$~*?-])(\.{0,2}/?[\w.+*?-]*(?:/[\w.+*?-]*)*)")
BRACES = re.compile(r"(?<![\w./@$~-])([\w./+-]*\{[\w.+-]*,[\w.,+-]*\}[\w./{},+-]*)")
URL = re.compile(r"\b[a-zA-Z][\w+.-]*://\S+|\bwww\.\S+")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
ANGLE_INCLUDE = re.compile(r"#\s*include\s*<([^>]+)>")


def repo_files(root):
    """Files git tracks or would track, that exist on disk (relative, '/'-separated)."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True).stdout.decode("utf-8", "surrogateescape")
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".git") and not d.startswith("build")
                       and d not in (".gpu", ".tools", "__pycache__")]
            names += [os.path.relpath(os.path.join(folder, f), root).replace(os.sep, "/") for f in files]
    return sorted({n for n in names if os.path.isfile(os.path.join(root, n))})


def git_ignored(root, paths):
    """The subset of `paths` (relative) that git ignores."""
    if not paths:
        return set()
    try:
        out = subprocess.run(["git", "-C", root, "check-ignore", "--no-index", "-z", "--stdin"],
                             input="\0".join(paths).encode() + b"\0", capture_output=True).stdout
        return {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}
    except OSError:  # no git: the top-level folders .gitignore names as /NAME/ (build*, .gpu, .tools)
        try:
            with open(os.path.join(root, ".gitignore"), encoding="utf-8") as f:
                tops = [line.strip().strip("/").rstrip("*") for line in f if re.match(r"^/[^/]+/$", line.strip())]
        except OSError:
            tops = []
        return {p for p in paths if tops and p.split("/", 1)[0].startswith(tuple(tops))}


def expand_braces(token):
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [x for alt in m.group(1).split(",") for x in expand_braces(token[:m.start()] + alt + token[m.end():])]


def normalize(path):
    """'a/./b/../c' -> 'a/c'; None if it climbs above its start."""
    parts = []
    for p in path.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(p)
    return "/".join(parts)


class Checker:
    def __init__(self, root):
        self.root = root
        self.files = set(repo_files(root))
        self.dirs = {""}
        for f in self.files:
            parts = f.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))
        self.basenames = {f.rsplit("/", 1)[-1] for f in self.files}
        self.dir_names = {d.rsplit("/", 1)[-1] for d in self.dirs if d}
        self.found = []  # (file, line number, token, reason)

    def exists(self, rel):
        return rel in self.files or rel in self.dirs

    def resolve(self, token, citing_dir, bases):
        """True if `token` names something of the repository from one of `bases` (folders)."""
        for base in bases:
            rel = normalize(base + "/" + token if base else token)
            if rel is not None and self.exists(rel):
                return True
        return False

    def candidate(self, token):
        """What kind of citation `token` is: 'top', 'path', 'bare', or None."""
        head = token.lstrip("./")
        first = head.split("/", 1)[0]
        if token.startswith("../") and len(head) > 1:
            return "path"  # explicitly relative: checked from the citing file's folder
        if "/" in token and (first in TOP or token.startswith(tuple(t + "/" for t in TOP))):
            return "top"
        if "/" in head and head.lower().endswith(PATH_EXT) and first in self.dir_names:
            return "path"  # its first folder is one of ours (not CLI/CLI.hpp, a system header)
        if "/" not in token and token.lower().endswith(BARE_EXT) and len(token) > 3 and not token.startswith("."):
            return "bare"
        return None

    def check_token(self, rel_file, lineno, token, pending):
        token = token.rstrip(".,;:")
        if not token or "..." in token or token.startswith("/") or any(c in token for c in "*?$"):
            return
        stem = token.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
        if len(stem) <= 1:
            return  # a placeholder such as x.glsl or Q.npy
        kind = self.candidate(token)
        if kind is None:
            return
        head = token.lstrip("./")
        if head.split("/", 1)[0].startswith("build"):
            return
        citing_dir = rel_file.rsplit("/", 1)[0] if "/" in rel_file else ""
        if kind == "bare":
            if token in self.basenames or self.resolve(token, citing_dir, ["", citing_dir]):
                return
            pending.append((rel_file, lineno, token, "no file of that name in the repository"))
            return
        ancestors = []
        d = citing_dir
        while d:
            ancestors.append(d)
            d = d.rsplit("/", 1)[0] if "/" in d else ""
        bases = ["", *ancestors, *INCLUDE_BASES]
        if token.startswith("../") or token.startswith("./"):
            bases = [citing_dir]  # explicitly relative: only from the citing file
            if normalize(citing_dir + "/" + token) is None:
                pending.append((rel_file, lineno, token, "outside the repository"))
                return
        if self.resolve(token, citing_dir, bases):
            return
        pending.append((rel_file, lineno, token, "does not exist"))

    def scan(self, rel_file):
        try:
            with open(os.path.join(self.root, rel_file), encoding="utf-8", errors="replace") as f:
                lines = f.read().split("\n")
        except OSError:
            return
        citing_dir = rel_file.rsplit("/", 1)[0] if "/" in rel_file else ""
        pending = []
        is_md = rel_file.endswith(".md")
        for n, line in enumerate(lines, 1):
            if IGNORE_MARKER in line:
                continue
            line = line.replace("${CMAKE_CURRENT_SOURCE_DIR}/", citing_dir + "/" if citing_dir else "")
            for var in ("${PROJECT_SOURCE_DIR}/", "${CMAKE_SOURCE_DIR}/"):
                line = line.replace(var, "")
            line = URL.sub(" ", line)
            if is_md:
                for target in MD_LINK.findall(line):
                    target = target.split("#", 1)[0]
                    if not target or "://" in target or target.startswith(("mailto:", "/")):
                        continue
                    rel = normalize(citing_dir + "/" + target if citing_dir else target)
                    if rel is None:
                        pending.append((rel_file, n, target, "link outside the repository"))
                    elif not self.exists(rel):
                        pending.append((rel_file, n, target, "link target does not exist"))
            for inc in ANGLE_INCLUDE.findall(line):
                if inc.startswith("vkflash/") and not self.exists("include/" + inc):
                    pending.append((rel_file, n, inc, "no such public header in include/"))
            line = ANGLE_INCLUDE.sub(" ", line)
            for m in BRACES.finditer(line):
                for token in expand_braces(m.group(1)):
                    self.check_token(rel_file, n, token, pending)
            line = BRACES.sub(" ", line)
            for m in TOKEN.finditer(line):
                if m.group(1):
                    self.check_token(rel_file, n, m.group(1), pending)
        # One report per (line, token); ignored paths (build outputs, .gpu/, .tools/) dropped.
        def forms(token):  # as git sees it: a file, or a folder (none outside the repository)
            rel = normalize(token)
            return [rel, rel + "/"] if rel else []
        ignored = git_ignored(self.root, sorted({f for _, _, t, _ in pending for f in forms(t)}))
        seen = set()
        for rel, n, token, reason in pending:
            key = (n, token)
            if key in seen or any(f in ignored for f in forms(token)):
                continue
            seen.add(key)
            self.found.append((rel, n, token, reason))


def files_to_scan(checker):
    out = []
    for f in sorted(checker.files):
        top = f.split("/", 1)[0]
        name = f.rsplit("/", 1)[-1]
        if f in ("README.md", "CMakeLists.txt") or (top == "docs" and f.endswith(".md") and f.count("/") == 1):
            out.append(f)
        elif top in SCAN_DIRS and (name == "CMakeLists.txt" or name.endswith(SCAN_EXT) or top == ".ci"):
            out.append(f)
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    checker = Checker(os.path.abspath(sys.argv[1]))
    scanned = files_to_scan(checker)
    if not scanned:
        print(f"check_cited_paths: no files to scan under {sys.argv[1]}", file=sys.stderr)
        return 2
    for f in scanned:
        checker.scan(f)
    if checker.found:
        print(f"check_cited_paths: {len(checker.found)} cited paths do not exist:", file=sys.stderr)
        for rel, n, token, reason in checker.found:
            print(f"  {rel}:{n}: {token} ({reason})", file=sys.stderr)
        return 1
    print(f"check_cited_paths: {len(scanned)} files, every cited path exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
