#!/bin/bash
# Session 12, call E: the one-run table on the final code (bench/device_speed.sh, five shapes, PyTorch's graph modes).
set -u
for f in .device/lib*.deb; do dpkg -x $f /; done; ldconfig
mkdir -p /tmp/b && gunzip -c .device/s12/dualscope.gz > /tmp/b/dualscope && chmod +x /tmp/b/dualscope
mkdir -p /tmp/speed; TORCH_MODES=graph TORCH_CPU=0 timeout 540 bash bench/device_speed.sh /tmp/b/dualscope /tmp/speed > /tmp/speed/summary.txt 2> /tmp/speed/stderr.txt
cat /tmp/speed/summary.txt
tar czf $OUT/speed.tgz -C /tmp speed
