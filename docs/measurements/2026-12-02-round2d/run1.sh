#!/usr/bin/env bash
# Device call 1: the GEMM sweep and the overlap probe (old binary + probe switch).
set -u
for f in .device/lib*.deb; do dpkg -x $f /; done; ldconfig
BIN=.device/dualscope; O=$OUT
$BIN gpu-info > $O/gpuinfo.txt 2>&1 || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
$BIN gpu-info | head -5
for shape in "--config small" "--config bench --batch 1 --seq-len 512" "--config bench"; do
  tag=$(echo "$shape" | tr -d ' -')
  for prec in f16 f32; do
    for probe in none overlap none overlap; do
      DUALSCOPE_BARRIER_PROBE=$probe $BIN bench --engine gpu $shape --precision $prec --steps 20 --warmup 3 --json > $O/tmp.json 2>>$O/bench_err.txt
      python3 -c "
import json,sys; x=json.load(open('$O/tmp.json'))['engines'][0]
print('$tag $prec $probe', 'replayed %.3f device %.3f instr-sum %.3f rec %.3f' % (x['replay_median_ms'], x['replay_device_median_ms'], x['instrumented_device_median_ms'], x['recurrence']['recurrence_ms'] if x.get('recurrence') else -1))" | tee -a $O/overlap.txt
    done
  done
done
bash .device/sweep.sh $BIN $O > $O/sweep.txt 2>&1; cat $O/sweep.txt
