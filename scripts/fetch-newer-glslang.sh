#!/usr/bin/env bash
# Optional: unpacks Debian trixie's glslang (15.x, with its own C library) into .tools/ without
# touching the system, so that the build also compiles the GL_KHR_cooperative_matrix kernels
# (AMD, Intel, newer mobile GPUs) and the GL_NV_cooperative_matrix2 ones (workgroup scope, the
# fastest on recent NVIDIA GPUs); Debian bookworm's glslang 12 only knows GL_NV_cooperative_matrix.
# Re-run cmake afterwards: shaders/CMakeLists.txt finds .tools/glslang-trixie/glslang.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.tools/glslang-trixie
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
mkdir -p "$work/lists/partial" "$dest/prefix"
echo "deb $mirror trixie main" > "$work/trixie.list"
o="-oDir::Etc::SourceList=$work/trixie.list -oDir::Etc::SourceParts=/dev/null -oDir::State::Lists=$work/lists"
apt-get $o update -qq
(cd "$work" && apt-get $o download glslang-tools libc6 libstdc++6 libgcc-s1 2>&1 | grep -v unsandboxed || true)
for deb in "$work"/*.deb; do dpkg -x "$deb" "$dest/prefix"; done
cat > "$dest/glslang" <<'WRAPPER'
#!/bin/sh
# trixie's glslang, run with trixie's own loader and libraries.
p=$(dirname "$0")/prefix
exec "$p/usr/lib64/ld-linux-x86-64.so.2" --library-path "$p/usr/lib/x86_64-linux-gnu" "$p/usr/bin/glslang" "$@"
WRAPPER
chmod +x "$dest/glslang"
"$dest/glslang" --version | head -1
