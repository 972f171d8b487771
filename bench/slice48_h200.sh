#!/bin/bash
# On the device host: the whole step at bench (mixed, f32) with the engine's
# split-K rule against shortest slices of 512 and 1024 for every product
# (DUALSCOPE_SPLIT_MIN_SLICE, a timing probe), interleaved rule 512 1024 1024
# 512 rule. gemm-bench's per-shape figures (sweep47_h200.sh) come from 30
# products of 30–150 µs after a pause on the host, too short for the clocks
# to settle; this asks the step itself.
# Usage: bench/slice48_h200.sh BIN OUT
set -uo pipefail
BIN=$1; OUT=$2; mkdir -p "$OUT"
for prec in mixed f32; do
  i=0
  for ms in rule 512 1024 1024 512 rule; do
    i=$((i + 1)); f="$OUT/${prec}_${ms}_$i.json"
    if [ $ms = rule ]; then unset DUALSCOPE_SPLIT_MIN_SLICE; else export DUALSCOPE_SPLIT_MIN_SLICE=$ms; fi
    $BIN bench --engine gpu --config bench --precision $prec --steps 20 --warmup 3 --json > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "bench $prec slice $ms" | head -1
  done
done
