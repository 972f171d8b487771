#!/bin/bash
# Session 12, call D: validation (layer 1.4.309) of the default paths, the coopmat tests, probes.
set -u
for f in .device/lib*.deb; do dpkg -x $f /; done; ldconfig
mkdir -p /tmp/b && for f in .device/s12/*.gz; do gunzip -c $f > /tmp/b/$(basename $f .gz); chmod +x /tmp/b/$(basename $f .gz); done
B=/tmp/b/dualscope; R=/tmp/d; mkdir -p $R
echo "#### validation"; timeout 200 bash bench/validate_h200.sh $B core $R/validate ladders train 2>&1 | tail -12
mkdir -p /tmp/v14 && dpkg -x .device/vvl14.deb /tmp/v14
export VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu
echo "#### vk_mixed (validation core)"; DUALSCOPE_VK_VALIDATION=core timeout 120 /tmp/b/vk_mixed --test-threads 1 > $R/vk_mixed.txt 2>&1; grep -E "^test |test result" $R/vk_mixed.txt
echo "#### vk_gemm big (validation core)"; DUALSCOPE_VK_VALIDATION=core timeout 60 /tmp/b/vk_gemm big --test-threads 1 > $R/vk_gemm.txt 2>&1; grep -E "^test |test result" $R/vk_gemm.txt
unset VK_LAYER_PATH LD_LIBRARY_PATH
echo "#### split A/B (final code) and grid probes"
for sh in "--config small" "--config bench --batch 1 --seq-len 512" "--config bench --batch 1 --seq-len 4096"; do for p in mixed f32; do for s in default 256; do
  tag=$(echo "$sh" | tr -d ' -')-$p-$s; env=(); [ $s = 256 ] && env=(DUALSCOPE_SPLIT_MIN_SLICE=256)
  env "${env[@]}" timeout 60 $B bench --engine gpu $sh --precision $p --steps 20 --warmup 5 --json > $R/ab-$tag.json 2>/dev/null
  python3 -c "
import json
g=[e for e in json.load(open('$R/ab-$tag.json'))['engines'] if e['engine']=='gpu'][0]
gm=sum(k['ms'] for k in g['kernels_ms'] if k['kernel'].startswith('gemm'))
print('$tag: replay %.3f device %.3f; gemm kernels %.3f ms' % (g['replay_median_ms'], g['replay_device_median_ms'], gm))" 2>&1 | tail -1
done; done; done
for sh in "--config bench" "--config bench --batch 1 --seq-len 512"; do
  tag=$(echo "$sh" | tr -d ' -')
  DUALSCOPE_GRID_PROBE=1 timeout 90 $B bench --engine gpu $sh --precision mixed --steps 10 --warmup 3 --json > $R/probe-$tag.json 2>/dev/null
  python3 -c "
import json
g=[e for e in json.load(open('$R/probe-$tag.json'))['engines'] if e['engine']=='gpu'][0]
r=g['recurrence']; print('$tag', json.dumps({k: r.get(k) for k in ['recurrence_ms','barrier_us','barriers_per_step','floor_ms','fwd_step_probe','bwd_wave_probe']}))" 2>&1 | tail -1
done
tar czf $OUT/d.tgz -C /tmp d
