#!/bin/bash
# On the device host: version 48 (b_hh's r and z gradients written by b_ih's
# column sum, b_hh's own sum over d_gh's n columns only) against version 47,
# interleaved old new new old (mixed and f32 at bench, mixed at small); then
# version 48's ladders (f32, f16 at small and bench) under validation layer
# 1.4.309 (.device/vvl14.deb).
# Usage: bench/colsum48_h200.sh OLD_BIN NEW_BIN OUT
set -uo pipefail
OLD=$1; NEW=$2; OUT=$3
mkdir -p "$OUT"
for run in "bench mixed" "bench f32" "small mixed"; do
  set -- $run; i=0
  for which in old new new old; do
    i=$((i + 1)); f="$OUT/$1_$2_${which}_$i.json"
    bin=$OLD; [ $which = new ] && bin=$NEW
    $bin bench --engine gpu --config $1 --precision $2 --steps 20 --warmup 3 --json > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "$1 $2 $which" | head -1
  done
done
bench/validate_h200.sh "$NEW" core "$OUT/val" ladders
