#!/usr/bin/env bash
# Screenshots of issue 18's views in the real window under Xvfb (lavapipe,
# the `small` config), each put into its state by a command file
# (`dualscope gui --commands FILE`, docs/gui-scripting.md) and taken by
# scripts/screenshot.sh at 1600x1000, which fails on a blank image.
#
#   scripts/precision_screenshots.sh [OUTDIR] [NAME...]    (default docs/images/, every view)
#
# The views (command files in scripts/screens/NAME.commands, images OUTDIR/NAME.png):
#   headroom-inspector   the inspector on a rung's tensor, scrolled to its f16 headroom plot
#   growth-panel-xvfb    the error-growth panel under the stepper after its run
#   precision-map-bisect the precision map editor and a precision-bisect result with its probes
#   sequence-16k         the Sequence view at 16384 positions
# A view whose command file is missing is skipped with a notice. Each view's
# wait (seconds before the shot) was timed on lavapipe with the app's log
# ("commands done at N s") plus a margin; SCREENSHOT_SCALE multiplies them.
#
# Env: DUALSCOPE_BIN (default: the debug binary, built if missing), DISPLAY_NUM (default 98).
set -euo pipefail
cd "$(dirname "$0")/.."

outdir=${1:-docs/images}
[ $# -gt 0 ] && shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(headroom-inspector growth-panel-xvfb precision-map-bisect sequence-16k)
scale=${SCREENSHOT_SCALE:-1}

# Seconds from the start to a settled window, per view (timed here, lavapipe, 2 cores).
wait_for() {
  case "$1" in
    headroom-inspector) echo 90 ;;   # done at 49 s
    growth-panel-xvfb) echo 90 ;;    # done at 41 s
    precision-map-bisect) echo 300 ;; # done at 188 s (11 probes)
    sequence-16k) echo 60 ;;         # done at 14 s
    *) echo 120 ;;
  esac
}

if [ -z "${DUALSCOPE_BIN:-}" ]; then
  cargo build --quiet --bin dualscope
  export DUALSCOPE_BIN="${CARGO_TARGET_DIR:-target}/debug/dualscope"
fi
mkdir -p "$outdir"
failed=0
for name in "${names[@]}"; do
  file="scripts/screens/$name.commands"
  if [ ! -f "$file" ]; then
    echo "precision screenshots: no $file, $name skipped" >&2
    continue
  fi
  wait_s=$(awk -v w="$(wait_for "$name")" -v s="$scale" 'BEGIN { printf "%d", w * s }')
  echo "precision screenshots: $name ($file, ${wait_s} s)"
  if ! SCREENSHOT_WAIT=$wait_s DISPLAY_NUM=${DISPLAY_NUM:-98} \
    scripts/screenshot.sh "$outdir/$name.png" -- --commands "$file"; then
    echo "precision screenshots: $name failed" >&2
    failed=1
  fi
done
exit $failed
