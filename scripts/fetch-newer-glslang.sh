#!/usr/bin/env bash
# Optional: unpacks Debian trixie's glslang (15.x, with its own C library) into .tools/ without
# touching the system, so that the build also compiles the GL_KHR_cooperative_matrix kernels
# (AMD, Intel, newer mobile GPUs) and the GL_NV_cooperative_matrix2 ones (workgroup scope, the
# fastest on recent NVIDIA GPUs); Debian bookworm's glslang 12 only knows GL_NV_cooperative_matrix.
# Re-run cmake afterwards: shaders/CMakeLists.txt finds .tools/glslang-trixie/glslang.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/trixie-packages.sh"
dest=$root/.tools/glslang-trixie
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
download_trixie_packages "$debs" glslang-tools libc6 libstdc++6 libgcc-s1
mkdir -p "$dest/prefix"
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$dest/prefix"; done
cat > "$dest/glslang" <<'WRAPPER'
#!/bin/sh
# trixie's glslang, run with trixie's own loader and libraries.
p=$(dirname "$0")/prefix
exec "$p/usr/lib64/ld-linux-x86-64.so.2" --library-path "$p/usr/lib/x86_64-linux-gnu" "$p/usr/bin/glslang" "$@"
WRAPPER
chmod +x "$dest/glslang"
"$dest/glslang" --version | head -1
