#!/bin/bash
# The GUI's frame times on a 16384-position row at `small` (docs/long-rows.md):
# drives the real app through egui_kittest (headless; wgpu on whatever Vulkan
# device there is) and prints the median and the largest CPU time of a frame
# (the UI pass, its texture uploads and the tessellation) for each interaction:
# idle, stepping the cursor, zooming and panning the attention heatmap,
# scrolling the gradient heatmap, jumping to the end and back. A benchmark: it
# asserts nothing about time. The lines also go to OUT (default
# target/gui_frames.txt).
# Usage: bench/gui_frames.sh [OUT]
# Env: PROFILE (dev or release; default dev); TEST_BIN: a long_rows test
# executable built elsewhere (`cargo test --release --test long_rows --no-run`,
# then `strip` it to carry it), run as it is instead of building here.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/gui_frames.txt}
profile=${PROFILE:-dev}
runtime=$(mktemp -d)
trap 'rm -rf "$runtime"' EXIT
export XDG_RUNTIME_DIR="$runtime" WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
[ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] && [ -z "${VK_DRIVER_FILES:-}" ] &&
  echo "note: set VK_DRIVER_FILES to pick a Vulkan driver; using the loader's default" >&2
mkdir -p "$(dirname "$out")"
if [ -n "${TEST_BIN:-}" ]; then
  GUI_FRAMES_OUT=$(realpath -m "$out") "$TEST_BIN" gui_frame_times_at_16k_positions --ignored --nocapture --test-threads 1
else
  GUI_FRAMES_OUT=$(realpath -m "$out") cargo test --profile "$profile" --test long_rows gui_frame_times_at_16k_positions \
    -- --ignored --nocapture --test-threads 1
fi
echo "host: $(nproc) CPU cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
cat "$out"
