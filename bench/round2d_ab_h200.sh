#!/usr/bin/env bash
# On the H200 host, from the repository root with .device/ carried (see ../shared/GPU.md): old against new in one run
# (old = DUALSCOPE_BARRIER_PROBE=whole DUALSCOPE_SPLIT_FEW=0: barriers on whole buffers, no few-tiles split),
# interleaved old new new old, then the ladders and train under layer 1.4.309. Writes to $OUT.
set -u
for f in .device/lib*.deb; do dpkg -x $f /; done; ldconfig
BIN=.device/dualscope; O=$OUT
$BIN gpu-info >/dev/null 2>&1 || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
one() { # tag env...
  local tag=$1; shift
  env "$@" $BIN bench --engine gpu $shape --precision $prec --steps 20 --warmup 3 --json > $O/tmp.json 2>>$O/bench_err.txt
  python3 -c "
import json; x=json.load(open('$O/tmp.json'))['engines'][0]
print('%-28s %-4s %-4s replayed %.3f device %.3f loss %.7f' % ('$stag', '$prec', '$tag', x['replay_median_ms'], x['replay_device_median_ms'], x['first_loss']))" | tee -a $O/ab.txt
  cp $O/tmp.json "$O/ab_${tag}_${prec}_$(echo $shape | tr -d ' -').json" 2>/dev/null
}
for shape in "--config small" "--config bench --batch 1 --seq-len 512" "--config bench"; do
  stag=$(echo "$shape" | tr -d ' -')
  for prec in f16 f32; do
    one old DUALSCOPE_BARRIER_PROBE=whole DUALSCOPE_SPLIT_FEW=0
    one new X=1
    one new X=1
    one old DUALSCOPE_BARRIER_PROBE=whole DUALSCOPE_SPLIT_FEW=0
  done
done
rm -f $O/ab_*.json
bash bench/validate_h200.sh $BIN core /tmp/val ladders train > /dev/null 2>&1
cp /tmp/val/summary.txt $O/validate_summary.txt; cat $O/validate_summary.txt
mkdir -p /tmp/v14 && export VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu DUALSCOPE_VK_VALIDATION=core
for p in f16 f32; do for mode in chained isolated; do
  $BIN ladder --config bench --precision $p --data README.md --len 512 --mode $mode > /tmp/l.out 2>&1; echo "ladder B1 T512 $p $mode rc=$? $(grep -h 'summary:' /tmp/l.out) $(grep -h '^dualscope: validation' /tmp/l.out)" | tee -a $O/ladders_b1.txt
done; done
