#!/bin/bash
# On the device host, session 20: version 54 (the GRU's input biases and the
# head's bias added by the products' kernels) against its own passes
# (DUALSCOPE_BIAS_PASS=1), one binary. First the bias test binary (built
# here: tests/vk_gemm_bias.rs, bit for bit on every kernel the H200 runs,
# the cooperative-matrix ones included) under validation layer 1.4.309, then
# the steps interleaved pass, fused, fused, pass: the mixed step at bench,
# small, B=1 T=512 and B=64 T=256 and the f32 step at bench (replayed
# medians of 20 steps; first losses). Usage:
#   bench/bias54_h200.sh BIN TEST_BIN OUT
set -uo pipefail
BIN=$1; TBIN=$2; OUT=$3
mkdir -p "$OUT/ab" /tmp/v14 && dpkg -x .device/vvl14.deb /tmp/v14
(
  export VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu
  DUALSCOPE_VK_VALIDATION=core timeout 200 "$TBIN" --test-threads 1 > "$OUT/test_bias.out" 2>&1
  echo "vk_gemm_bias rc=$? $(grep -h 'test result' "$OUT/test_bias.out" | tail -1)" | tee "$OUT/summary.txt"
)
SHAPES=${SHAPES:-"bench:mixed:--config bench;bench:f32:--config bench;small:mixed:--config small;b1t512:mixed:--config bench --batch 1 --seq-len 512;b64:mixed:--config bench --batch 64 --seq-len 256"}
IFS=';' read -ra shapes <<< "$SHAPES"
for s in "${shapes[@]}"; do
  IFS=':' read -r tag prec args <<< "$s"; i=0
  for which in pass fused fused pass; do
    i=$((i + 1)); f="$OUT/ab/${tag}_${prec}_${which}_$i.json"
    sw=""; [ $which = pass ] && sw=1
    DUALSCOPE_BIAS_PASS=$sw $BIN bench --engine gpu --precision $prec --steps 20 --warmup 3 --json $args > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "$tag $prec $which" | head -1 | tee -a "$OUT/summary.txt"
  done
done
