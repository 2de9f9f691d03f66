#!/usr/bin/env bash
# vkflash-viewer refuses bad options as the vkflash CLI does: exit 2, one "vkflash-viewer: error:"
# line, before rendering anything. Usage: viewer_bad_options.sh VIEWER
set -uo pipefail
viewer=$1
failures=0
expect_refused() {  # expect_refused NEEDLE ARGS...
  local needle=$1
  shift
  local err rc
  err=$("$viewer" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 2 ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] ||
     [[ "$err" != "vkflash-viewer: error: "*"$needle"* ]]; then
    echo "FAIL: vkflash-viewer $*: exit $rc, stderr: $err"
    failures=$((failures + 1))
  else
    echo "ok: vkflash-viewer $*: $err"
  fi
}
expect_refused "folder" --headless --frames 2 --screenshot /no/such/folder/shot.png
expect_refused "directory" --headless --frames 2 --screenshot /tmp
expect_refused "--seq" --headless --frames 2 --seq 2000
expect_refused "--frames" --headless --screenshot shot.png
exit $((failures > 0))
