#!/bin/bash
# On the device host: the mixed step of two binaries, old new new old, at
# B=1 T=512, bench and small (replayed medians of 20 steps; first losses).
# SHAPES (';'-separated TAG:ARGS) picks others. Usage:
#   bench/ab_mixed_h200.sh OLD_BIN NEW_BIN OUT
set -uo pipefail
OLD=$1; NEW=$2; OUT=$3
mkdir -p "$OUT"
SHAPES=${SHAPES:-"b1t512:--config bench --batch 1 --seq-len 512;bench:--config bench;small:--config small"}
IFS=';' read -ra shapes <<< "$SHAPES"
for s in "${shapes[@]}"; do
  tag=${s%%:*}; args=${s#*:}; i=0
  for which in old new new old; do
    i=$((i + 1)); f="$OUT/${tag}_${which}_$i.json"; bin=$OLD; [ $which = new ] && bin=$NEW
    $bin bench --engine gpu --precision mixed --steps 20 --warmup 3 --json $args > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "$tag mixed $which" | head -1
  done
done
