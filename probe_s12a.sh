#!/bin/bash
# Session 12, call A: helpers' correctness and old-vs-new timings on the H200.
set -u
for f in .device/lib*.deb; do dpkg -x $f /; done; ldconfig
mkdir -p /tmp/b && for f in .device/s12/*.gz; do gunzip -c $f > /tmp/b/$(basename $f .gz); chmod +x /tmp/b/$(basename $f .gz); done
B=/tmp/b/dualscope
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
echo "#### wg19"; WG19_STEPS=30 WG19_WARMUP=5 timeout 280 bash bench/wg19_h200.sh $B $OUT/wg19 /tmp/b/vk_mixed 2>&1 | tail -60
echo "#### gemm19"; timeout 250 bash bench/gemm19_h200.sh $B $OUT/gemm19 /tmp/b/vk_gemm 2>&1 | tail -60
