#!/usr/bin/env bash
# The README's tour in screenshots: runs the real window under Xvfb (lavapipe)
# with `dualscope gui --window-size WxH --commands scripts/screens/tour.commands`
# once per size, and takes step K's screenshot while the command file's K-th
# `sleep` runs: a step of a command file starts only once the app is idle (its
# jobs finished and drawn, docs/gui-scripting.md), so no wait here is a guess
# at how long a ladder takes. Fails on a blank image, on an app that died, or
# when the steps have not all run within TOUR_TIMEOUT seconds.
#
#   scripts/tour_screenshots.sh [OUTDIR] [WxH...]   (default docs/images, 1280x800 1600x1000)
#
# Images: OUTDIR/tour-<n>-<step>-<W>x<H>.png for the steps below, in order.
# Env: DUALSCOPE_BIN (default: the release binary, built if missing),
# TOUR_TIMEOUT (seconds per size, default 900), DISPLAY_NUM (default 97).
set -euo pipefail
cd "$(dirname "$0")/.."

outdir=${1:-docs/images}
[ $# -gt 0 ] && shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1280x800 1600x1000)
steps=(open ladder failing-rung worst save)
commands=scripts/screens/tour.commands
timeout_s=${TOUR_TIMEOUT:-900}
num=${DISPLAY_NUM:-97}
convert=/usr/bin/convert  # not another `convert` earlier on PATH
import=/usr/bin/import

sleeps=$(grep -c '^sleep' "$commands")
if [ "$sleeps" -ne ${#steps[@]} ]; then
  echo "tour: $commands has $sleeps sleep lines, one per step is needed (${#steps[@]})" >&2
  exit 1
fi

bin=${DUALSCOPE_BIN:-}
if [ -z "$bin" ]; then
  bin="${CARGO_TARGET_DIR:-target}/release/dualscope"
  [ -x "$bin" ] || cargo build --quiet --release --bin dualscope
fi
[ -x "$bin" ] || { echo "tour: no binary at $bin" >&2; exit 1; }
mkdir -p "$outdir" target/tour  # target/tour: where step 5 saves its session

runtime=$(mktemp -d)
xvfb_pid=""
app_pid=""
stop() {
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null || true
  [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  app_pid=""
  xvfb_pid=""
}
trap 'stop; rm -rf "$runtime"' EXIT

export XDG_RUNTIME_DIR="$runtime"
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
[ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] &&
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}

shoot() { # OUT: the screen, checked not blank
  "$import" -display ":$num" -window root "$1"
  local sd
  sd=$("$convert" "$1" -format '%[fx:standard_deviation]' info:)
  if ! awk -v s="$sd" 'BEGIN { exit !(s > 0.02) }'; then
    echo "tour: $1 is blank (standard deviation $sd <= 0.02)" >&2
    return 1
  fi
  echo "tour: $1 (standard deviation $sd)"
}

for size in "${sizes[@]}"; do
  [[ $size =~ ^[0-9]+x[0-9]+$ ]] || { echo "tour: size $size: expected WxH" >&2; exit 2; }
  log="$runtime/dualscope-$size.log"
  Xvfb ":$num" -screen 0 "${size}x24" -nolisten tcp >"$runtime/xvfb.log" 2>&1 &
  xvfb_pid=$!
  for _ in $(seq 100); do
    [ -S "/tmp/.X11-unix/X$num" ] && break
    sleep 0.1
  done
  [ -S "/tmp/.X11-unix/X$num" ] || { echo "tour: Xvfb did not start" >&2; cat "$runtime/xvfb.log" >&2; exit 1; }
  DISPLAY=":$num" "$bin" gui --window-size "$size" --commands "$commands" >"$log" 2>&1 &
  app_pid=$!
  start=$SECONDS
  taken=0
  while [ "$taken" -lt ${#steps[@]} ]; do
    if ! kill -0 "$app_pid" 2>/dev/null; then
      echo "tour: dualscope exited before step $((taken + 1)) at $size; its output:" >&2
      cat "$log" >&2
      exit 1
    fi
    if [ $((SECONDS - start)) -gt "$timeout_s" ]; then
      echo "tour: step $((taken + 1)) not reached within $timeout_s s at $size; the app's log:" >&2
      cat "$log" >&2
      exit 1
    fi
    # The app logs each step as it starts: `dualscope: commands line N `sleep 3` at T s`.
    started=$(grep -c 'commands line [0-9]* `sleep' "$log" || true)
    if [ "$started" -gt "$taken" ]; then
      sleep 1  # a frame or two into the sleep: the step's result is drawn
      taken=$((taken + 1))
      shoot "$outdir/tour-$taken-${steps[$((taken - 1))]}-$size.png"
    else
      sleep 0.2
    fi
  done
  echo "tour: $size done in $((SECONDS - start)) s"
  grep 'dualscope: commands\|error\|Error' "$log" | sed "s/^/tour: [$size] /" || true
  stop
done
