#!/usr/bin/env bash
# Runs vkflash-viewer under Xvfb (validation layer on: any message fails it) and checks that its
# screenshot shows something. Usage: viewer_test.sh VIEWER OUTPUT.png [viewer options...]
set -euo pipefail
viewer=$1 shot=$2
shift 2
xvfb-run -a -s "-screen 0 1280x800x24" "$viewer" --validation --screenshot "$shot" "$@"
python3 "$(dirname "$0")/check_screenshot.py" "$shot"
