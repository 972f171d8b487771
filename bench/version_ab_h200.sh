#!/bin/bash
# On the device host: a version against the binary before it (first used for
# version 47, q, k and v as one product), interleaved old new new old, the
# mixed and f32 steps at bench and small, the mixed step at B=1 T=512 and
# B=64 T=256; then the new binary's ladders (f32, f16 at small and bench) and
# a carried-state check under validation layer 1.4.309 (.device/vvl14.deb).
# Usage: bench/version_ab_h200.sh OLD_BIN NEW_BIN OUT
set -uo pipefail
OLD=$1; NEW=$2; OUT=$3
mkdir -p "$OUT"
ab() { # tag, precision, bench args...
  local tag=$1 prec=$2; shift 2
  local i=0
  for which in old new new old; do
    i=$((i + 1)); f="$OUT/${tag}_${prec}_${which}_$i.json"
    bin=$OLD; [ $which = new ] && bin=$NEW
    $bin bench --engine gpu --precision $prec --steps 20 --warmup 3 --json "$@" > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "$tag $prec $which" | head -1
  done
}
ab bench mixed --config bench
ab bench f32 --config bench
ab small mixed --config small
ab small f32 --config small
ab b1t512 mixed --config bench --batch 1 --seq-len 512
ab b64 mixed --config bench --batch 64 --seq-len 256
bench/validate_h200.sh "$NEW" core "$OUT/val" ladders
text=/tmp/validate-text.txt
DUALSCOPE_VK_VALIDATION=core VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d \
  LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu \
  "$NEW" ladder --config small --precision f16 --data $text --len 600 --carry-check 3 --json > "$OUT/val/carry.out" 2> "$OUT/val/carry.err"
echo "carry-check rc=$? $(grep -h '^dualscope: validation' "$OUT/val/carry.err" | tail -1)" | tee -a "$OUT/val/summary.txt"
