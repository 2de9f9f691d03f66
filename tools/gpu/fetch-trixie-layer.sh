#!/usr/bin/env bash
# Run on the dev machine: puts Debian trixie's Vulkan loader and validation layer (1.4.309, which
# know VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2; bookworm's 1.3.239 rejects their
# feature structs) with trixie's C library into .gpu/trixie/. tools/gpu/device_checks.sh then runs
# the test suite under them, through trixie's dynamic loader, on the GPU machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=$root/.gpu/trixie
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
mkdir -p "$work/lists/partial" "$dest"
echo "deb $mirror trixie main" > "$work/trixie.list"
o="-oDir::Etc::SourceList=$work/trixie.list -oDir::Etc::SourceParts=/dev/null -oDir::State::Lists=$work/lists"
apt-get $o update -qq
(cd "$dest" && apt-get $o download vulkan-validationlayers libvulkan1 libc6 libstdc++6 libgcc-s1 2>&1 | grep -v unsandboxed || true)
ls "$dest"
