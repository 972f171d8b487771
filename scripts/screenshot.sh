#!/usr/bin/env bash
# Starts dualscope's GUI under Xvfb, takes a screenshot of the screen and fails
# when the image is blank (or the app died before it).
#
#   scripts/screenshot.sh [OUT.png] [-- ARGS for `dualscope gui`]
#
# Env: DUALSCOPE_BIN (default: the debug binary, built if missing), SCREENSHOT_WAIT
# (seconds before the shot, default 20), DISPLAY_NUM (default 99).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-target/screenshot.png}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
wait_s=${SCREENSHOT_WAIT:-20}
num=${DISPLAY_NUM:-99}
convert=/usr/bin/convert  # not another `convert` earlier on PATH
import=/usr/bin/import

bin=${DUALSCOPE_BIN:-}
if [ -z "$bin" ]; then
  cargo build --quiet --bin dualscope
  bin="${CARGO_TARGET_DIR:-target}/debug/dualscope"
fi
[ -x "$bin" ] || { echo "screenshot: no binary at $bin" >&2; exit 1; }
mkdir -p "$(dirname "$out")"

runtime=$(mktemp -d)
log="$runtime/dualscope.log"
xvfb_pid=""
app_pid=""
cleanup() {
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null || true
  [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$runtime"
}
trap cleanup EXIT

Xvfb ":$num" -screen 0 1600x1000x24 -nolisten tcp >"$runtime/xvfb.log" 2>&1 &
xvfb_pid=$!
for _ in $(seq 100); do
  [ -S "/tmp/.X11-unix/X$num" ] && break
  sleep 0.1
done
[ -S "/tmp/.X11-unix/X$num" ] || { echo "screenshot: Xvfb did not start" >&2; cat "$runtime/xvfb.log" >&2; exit 1; }

export DISPLAY=":$num" XDG_RUNTIME_DIR="$runtime"
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
[ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] &&
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}

"$bin" gui "$@" >"$log" 2>&1 &
app_pid=$!
sleep "$wait_s"
if ! kill -0 "$app_pid" 2>/dev/null; then
  echo "screenshot: dualscope exited before the screenshot; its output:" >&2
  cat "$log" >&2
  exit 1
fi

"$import" -window root "$out"
sd=$("$convert" "$out" -format '%[fx:standard_deviation]' info:)
echo "screenshot: $out (standard deviation $sd)"
if ! awk -v s="$sd" 'BEGIN { exit !(s > 0.02) }'; then
  echo "screenshot: the image is blank (standard deviation $sd <= 0.02)" >&2
  exit 1
fi
