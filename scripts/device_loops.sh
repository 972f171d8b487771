#!/usr/bin/env bash
# On the H200 host (through the device tool): the checks of issue 16's loop
# limits and --poison. The ladder poisoned at tiny and small in both modes; long
# rows of real text at tiny (T = 5000 and 16384) with the per-row recurrence
# forced (the kernels whose chunks changed) and with the default grid; the
# poison-only fault with and without --poison. Usage: scripts/device_loops.sh BIN OUTDIR
set -uo pipefail
B=$1; OUT=$2; mkdir -p "$OUT"
cat docs/*.md src/cpu/*.rs src/vk/*.rs src/vk/engine/*.rs > /tmp/real.txt
S="$OUT/loops_summary.txt"; : > "$S"
run() { # tag, env, args...
  local tag=$1 env=$2; shift 2
  env $env $B ladder "$@" --json > "$OUT/$tag.json" 2> "$OUT/$tag.err"; local rc=$?
  python3 -c "
import json; v=json.load(open('$OUT/$tag.json')); bad=[r['id'] for r in v['rungs'] if r['status']!='pass']
print('$tag', 'exit', $rc, 'not passing:', bad, 'end-to-end:', (v.get('end_to_end') or {}).get('status'))" >> "$S" 2>&1 \
    || echo "$tag exit $rc (no report)" >> "$S"
}
for cfg in tiny small; do for mode in isolated chained; do
  run poison-$cfg-$mode "" --config $cfg --mode $mode --poison
done; done
for len in 5000 16384; do
  run seq-$len DUALSCOPE_RECURRENCE=seq --config tiny --data /tmp/real.txt --offset 100 --len $len
  run grid-$len "" --config tiny --data /tmp/real.txt --offset 100 --len $len
done
run noclear-plain "" --config small --fault loss_no_clear
run noclear-poison "" --config small --fault loss_no_clear --poison
cat "$S"
