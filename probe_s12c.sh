#!/bin/bash
# Session 12, call C: the one-run table (bench/device_speed.sh, five shapes, PyTorch's graph modes).
set -u
for f in .device/lib*.deb; do dpkg -x $f /; done; ldconfig
mkdir -p /tmp/b && for f in .device/s12/*.gz; do gunzip -c $f > /tmp/b/$(basename $f .gz); chmod +x /tmp/b/$(basename $f .gz); done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
mkdir -p /tmp/speed; TORCH_MODES=graph TORCH_CPU=0 timeout 560 bash bench/device_speed.sh /tmp/b/dualscope /tmp/speed > /tmp/speed/summary.txt 2> /tmp/speed/stderr.txt
cat /tmp/speed/summary.txt
tar czf $OUT/speed.tgz -C /tmp speed
