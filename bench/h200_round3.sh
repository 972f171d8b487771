#!/bin/bash
# On the device host: grid and wavefront recurrences cut into bounded dispatches
# on every device. Long rows through the GPU paths (f32 grid, f16 wavefront),
# the loop and poison checks, and the step time before/after.
# Usage: bench/h200_round3.sh OLD_BIN NEW_BIN OUTDIR
set -uo pipefail
A=$1; B=$2; OUT=$3; mkdir -p "$OUT/long"
cat docs/*.md src/cpu/*.rs src/vk/*.rs src/vk/engine/*.rs > /tmp/real.txt
for args in "small-f32-4096:--precision f32 --len 4096" "small-f32-16384:--precision f32 --len 16384" \
            "small-f16-4096:--precision f16 --len 4096" "small-f16-16384:--precision f16 --len 16384" \
            "bench-f16-2048:--config bench --precision f16 --len 2048"; do
  name=${args%%:*}; extra=${args#*:}
  cfg="--config small"; case $extra in *--config*) cfg="";; esac
  $B ladder $cfg $extra --data /tmp/real.txt --offset 100 --json > $OUT/long/$name.json 2> $OUT/long/$name.err
  echo "$name exit $? $(python3 -c "
import json; v=json.load(open('$OUT/long/$name.json')); print('not passing:', [r['id'] for r in v['rungs'] if r['status']!='pass'], 'e2e', (v.get('end_to_end') or {}).get('status'), 'worst', max(r['rel_l2'] for r in v['rungs']))" 2>&1 | tail -1)"
done
bash scripts/device_loops.sh $B $OUT/loops > /dev/null 2>&1; cat $OUT/loops/loops_summary.txt
bash bench/device_ab.sh $A $B $OUT/ab 3 | tail -4
