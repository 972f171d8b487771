#!/usr/bin/env bash
# The GUI walk with a capture, shown in one screenshot: a capture of a step
# with a planted persistent engine fault (reset_before_matmul) is opened in
# the GUI, the ladder runs on its batch and weights and fails first at
# gru_fwd, the stepper stands at the position that dominates the gradient,
# and the session is saved (the ignored test `capture_walk_for_the_screenshot`
# in tests/gui/capture.rs drives the app through all of it and checks each step).
# Then the real window is started under Xvfb with that session
# (`dualscope gui --session walk.ron`), which reopens the capture, its ladder
# results and the stepper's place, and the screen is taken
# (scripts/screenshot.sh, which fails on a blank image).
#
#   scripts/capture_walk_screenshot.sh [OUT.png]     (default docs/images/capture-walk.png)
#
# Env: as scripts/screenshot.sh (SCREENSHOT_WAIT, DISPLAY_NUM, DUALSCOPE_BIN).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-docs/images/capture-walk.png}
walk=$(mktemp -d)
trap 'rm -rf "$walk"' EXIT

export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
[ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] &&
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}

DUALSCOPE_WALK_DIR="$walk" cargo test --quiet --test gui -- --ignored --exact capture::capture_walk_for_the_screenshot --nocapture
[ -f "$walk/walk.ron" ] || { echo "capture walk: the walk saved no session" >&2; exit 1; }

SCREENSHOT_WAIT=${SCREENSHOT_WAIT:-25} DISPLAY_NUM=${DISPLAY_NUM:-97} \
  scripts/screenshot.sh "$out" -- --session "$walk/walk.ron"
