#!/usr/bin/env bash
# On the H200 host (through the device tool): the ladder with validation on for
# the small and bench configs and a 4096-token row of real text, in both modes;
# the fault catalogue; a length bisect. Usage: scripts/device_ladder.sh BIN OUTDIR
set -uo pipefail
B=$1; OUT=$2; mkdir -p "$OUT"
cat docs/*.md src/cpu/*.rs src/vk/*.rs > /tmp/real.txt
export DUALSCOPE_VK_VALIDATION=1
S="$OUT/ladder_summary.txt"
run() { # tag, args...
  local tag=$1; shift
  $B ladder "$@" --out /tmp/l-$tag.json > /tmp/l-$tag.txt 2>&1; echo "== $tag: exit $?" >> "$S"
  grep -E "^[a-z_]+ +(pass|warn|fail)|end-to-end|validation|batch:" /tmp/l-$tag.txt | cut -c1-160 >> "$S"
}
for cfg in small bench; do for mode in isolated chained; do run $cfg-$mode --config $cfg --mode $mode; done; done
for mode in isolated chained; do run 4096-$mode --config small --data /tmp/real.txt --offset 1000 --len 4096 --mode $mode; done
cp /tmp/l-bench-chained.json /tmp/l-4096-chained.json "$OUT/"
F="$OUT/faults.txt"
for f in $($B faults --json | python3 -c "import json,sys; print(' '.join(x['name'] for x in json.load(sys.stdin)))"); do
  poison=""; [ "$f" = loss_no_clear ] && poison=--poison  # only a poisoned run shows it
  $B ladder --config small --fault $f $poison --json > /tmp/f.json 2>/dev/null; rc=$?
  python3 -c "
import json; v=json.load(open('/tmp/f.json')); bad=[r['id'] for r in v['rungs'] if r['status']=='fail']
print('$f', 'exit', $rc, 'first failing rung:', bad[0] if bad else None, 'end-to-end:', v['end_to_end']['status'])" >> "$F"
done
$B bisect --config small --fault window_off_by_one --max-len 512 --json > "$OUT/bisect_window.json" 2>&1
cat "$S" "$F" "$OUT/bisect_window.json" | cut -c1-200
