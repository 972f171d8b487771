#!/usr/bin/env bash
# On the device host, after version 47: gemm-bench of bench's products (the
# fused q, k, v ones among them) on the 128x128 cooperative-matrix kernel and
# the f32 128x128 kernel, per shortest split-K slice (DUALSCOPE_SPLIT_MIN_SLICE;
# default = the engine's rule); then the attention kernels' choice at bench
# (DUALSCOPE_ATTN=narrow against wide, interleaved wide narrow narrow wide), mixed and f32.
# Usage: bench/sweep47_h200.sh BIN OUT
BIN=$1; O=$2
PATHS="coopmat big" SLICES="default 1024 512 128 64" SETS=BENCH \
  BENCH_SHAPES="8192x768x512,tb 768x512x8192,ta 8192x512x768 8192x1536x256,tb 1536x512x8160,ta 1536x512x8192,ta 1536x256x8192,ta 8192x256x1536 8192x256x512,tb 256x512x8192,ta 8192x512x256" \
  bench/gemm_sweep_h200.sh "$BIN" "$O"
for prec in mixed f32; do
  i=0
  for a in wide narrow narrow wide; do
    i=$((i + 1)); f="$O/attn_${prec}_${a}_$i.json"
    DUALSCOPE_ATTN=$a $BIN bench --engine gpu --config bench --precision $prec --steps 20 --warmup 3 --json > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "bench $prec ATTN=$a" | head -1
  done
done
