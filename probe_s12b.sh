#!/bin/bash
# Session 12, call B: attention old vs new, split-K probe at small, DEER probe.
set -u
for f in .device/lib*.deb; do dpkg -x $f /; done; ldconfig
mkdir -p /tmp/b && for f in .device/s12/*.gz; do gunzip -c $f > /tmp/b/$(basename $f .gz); chmod +x /tmp/b/$(basename $f .gz); done
B=/tmp/b/dualscope
echo "#### attn19"; timeout 240 bash bench/attn19_h200.sh $B $OUT/attn19 2>&1 | tail -40
echo "#### split-K min slice"
for cfg in "--config small" "--config bench"; do for p in mixed f32; do for s in 256 64 32; do
  DUALSCOPE_SPLIT_MIN_SLICE=$s timeout 60 $B bench --engine gpu $cfg --precision $p --steps 20 --warmup 5 --json > $OUT/split-$p-$s-$(echo $cfg | tr -d ' -').json 2>/dev/null
  python3 -c "
import json,sys
g=[e for e in json.load(open('$OUT/split-$p-$s-$(echo $cfg | tr -d ' -').json'))['engines'] if e['engine']=='gpu'][0]
gm=sum(k['ms'] for k in g['kernels_ms'] if k['kernel'].startswith('gemm'))
print('$cfg $p min_slice=$s: replay %.3f device %.3f; gemm kernels %.3f ms' % (g['replay_median_ms'], g['replay_device_median_ms'], gm))
" 2>&1 | tail -1
done; done; done
echo "#### deer"
T=/tmp/text.txt; cat README.md docs/*.md src/*/*.rs > $T
timeout 60 $B train --engine gpu --config bench --steps 600 --data $T --out /tmp/tr --quiet > /dev/null 2>&1; ls /tmp/tr
timeout 150 python3 bench/deer_probe.py --checkpoint /tmp/tr/last.safetensors --text $T --seq-len 512 --offset 20000 2>&1 | tail -6
timeout 100 python3 bench/deer_probe.py --checkpoint /tmp/tr/last.safetensors --text $T --seq-len 4096 --offset 20000 --full-max-iter 0 2>&1 | tail -4
echo "#### vk_mixed coopmat tests"
mkdir -p /tmp/v14 && dpkg -x .device/vvl14.deb /tmp/v14
VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu timeout 150 /tmp/b/vk_mixed coopmat --test-threads 1 2>&1 | grep -v "^$" | tail -30
