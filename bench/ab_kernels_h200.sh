#!/bin/bash
# On the device host: the step of two binaries, old new new old, at each shape
# of SHAPES (';'-separated TAG:PRECISION:ARGS): bench/bench_summary.py's lines
# (replayed medians of 20 steps, first losses) with the per-kernel medians of
# the kernels whose names match KERNELS (a regex; default the attention's). Usage:
#   bench/ab_kernels_h200.sh OLD_BIN NEW_BIN OUT
set -uo pipefail
OLD=$1; NEW=$2; OUT=$3
mkdir -p "$OUT"
SHAPES=${SHAPES:-"bench:mixed:--config bench;bench:f32:--config bench;b64:mixed:--config bench --batch 64 --seq-len 256;b1t4096:mixed:--config bench --batch 1 --seq-len 4096"}
KERNELS=${KERNELS:-attn}
IFS=';' read -ra shapes <<< "$SHAPES"
for s in "${shapes[@]}"; do
  IFS=':' read -r tag prec args <<< "$s"; i=0
  for which in old new new old; do
    i=$((i + 1)); f="$OUT/${tag}_${prec}_${which}_$i.json"; bin=$OLD; [ $which = new ] && bin=$NEW
    $bin bench --engine gpu --precision $prec --steps 20 --warmup 3 --json $args > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "$tag $prec $which" "$KERNELS" | tee -a "$OUT/summary.txt"
  done
done
