# Sourced by the scripts that borrow Debian trixie packages without installing them
# (scripts/fetch-newer-glslang.sh, tools/lab/fetch-trixie-layer.sh).
# download_trixie_packages DEST PACKAGE...: the packages' .deb files into DEST, through apt with
# trixie's package lists in a temporary folder (the system's apt state is not touched).
download_trixie_packages() (
  set -euo pipefail
  dest=$1
  shift
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  mkdir -p "$work/lists/partial" "$dest"
  echo "deb $mirror trixie main" > "$work/trixie.list"
  o="-oDir::Etc::SourceList=$work/trixie.list -oDir::Etc::SourceParts=/dev/null -oDir::State::Lists=$work/lists"
  apt-get $o update -qq
  (cd "$dest" && apt-get $o download "$@" 2>&1 | grep -v unsandboxed || true)
)
