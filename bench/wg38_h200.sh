#!/bin/bash
# On the device host: where the one-workgroup recurrences' time goes
# (gru_*_wg_cm, docs/speed.md "wg19", version 38), without changing a kernel:
# `bench --precision mixed` at the `small` shape (B=8 T=128) with the hidden
# width H = 128, 64, 32 (the product's work scales with H², the barriers and
# the per-step latencies do not), and at H = 128 with B = 1 and B = 16, each
# with DUALSCOPE_WG=1 (the coopmat variant), =fma (the FMA variant) and =0
# (the wavefronts), one run: the recurrence kernels' per-kernel ms.
# Usage: bench/wg38_h200.sh BIN OUT
set -uo pipefail
BIN=$1; OUT=$2; mkdir -p "$OUT"
for c in "128:8" "64:8" "32:8" "128:1" "128:16"; do
  h=${c%%:*}; b=${c#*:}; cfg="$OUT/h${h}_b$b.json"
  printf '{"vocab":256,"d_embed":64,"hidden":%s,"layers":2,"attn_dim":64,"heads":4,"window":32,"batch":%s,"seq_len":128}\n' "$h" "$b" > "$cfg"
  for wg in 1 fma 0; do
    f="$OUT/bench-h${h}-b$b-wg$wg.json"
    DUALSCOPE_WG=$wg $BIN bench --engine gpu --config "$cfg" --precision mixed --steps 20 --warmup 3 --json > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "H=$h B=$b WG=$wg"
  done
done
