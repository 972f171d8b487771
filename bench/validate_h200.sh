#!/bin/bash
# Runs the ladders and a training run under the Khronos validation layer on the
# device host. Usage: bench/validate_h200.sh BINARY MODE OUTDIR [what...]
#   MODE: core | sync | gpu (DUALSCOPE_VK_VALIDATION); what: ladders, long, train (default all)
# Needs .device/vvl14.deb (Debian 13's vulkan-validationlayers 1.4.309, see ../shared/GPU.md).
set -u
bin=$1; mode=$2; out=$3; shift 3
what=${*:-ladders long train}
mkdir -p /tmp/v14 "$out" && dpkg -x .device/vvl14.deb /tmp/v14
export VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d
export LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu
export DUALSCOPE_VK_VALIDATION=$mode
text=/tmp/validate-text.txt
cat README.md docs/*.md docs/*/*.md src/*/*.rs > $text 2>/dev/null
run() { # name, args...
  local name=$1; shift
  local t0=$(date +%s%N)
  "$bin" "$@" > "$out/$name.out" 2> "$out/$name.err"; local rc=$?
  local t1=$(date +%s%N)
  local vuids=$(grep -o 'VUID-[A-Za-z0-9_-]*\|SYNC-[A-Za-z0-9_-]*' "$out/$name.err" | sort | uniq -c | tr '\n' ' ')
  printf '%-28s rc=%d %6ss ids:[%s] %s\n' "$name" $rc $(( (t1 - t0) / 1000000000 )) "$vuids" "$(grep -h '^dualscope: validation' "$out/$name.err" | tail -1)" | tee -a "$out/summary.txt"
}
for w in $what; do case $w in
  ladders) for p in f32 f16; do for c in small bench; do run ladder-$c-$p ladder --config $c --precision $p --json; done; done ;;
  long) for p in f32 f16; do run ladder-small-$p-T4096 ladder --config small --precision $p --data $text --len 4096 --json; done ;;
  train) for p in f32 f16; do run train50-small-$p train --config small --engine gpu --precision $p --data $text --steps 50 --out /tmp/run-$p-$mode-$$; done ;;
esac; done
