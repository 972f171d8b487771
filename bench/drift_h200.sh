#!/bin/bash
# On the device host: `dualscope drift` at `small` for 200 steps on a real
# text file, the GPU step in f32 and in f16 (and, for contrast, f32 with a
# persistent fault planted at step 100); prints each run's summary: the first
# step outside the rounding envelope, the worst divergence / envelope ratio,
# the largest divergence and envelope, the last losses and the wall time.
# Each run's report is OUT/NAME.json (and OUT/NAME/drift.json, with the
# capture of the first step outside under OUT/NAME/captures/).
# Usage: bench/drift_h200.sh BIN DATA OUT [RUN...]   (RUN: f32 f16 planted-f32; default all)
set -uo pipefail
BIN=$1; DATA=$2; OUT=$3; shift 3
RUNS=${*:-f32 f16 planted-f32}
mkdir -p "$OUT"
for name in $RUNS; do
  case $name in
    f32) extra="--precision f32" ;;
    f16) extra="--precision f16" ;;
    planted-f32) extra="--precision f32 --inject persistent@100 --stop-at-first" ;;
    *) echo "unknown run $name (f32, f16, planted-f32)"; exit 2 ;;
  esac
  rm -rf "${OUT:?}/$name"
  t0=$(date +%s.%N)
  $BIN drift --data "$DATA" --config small --steps 200 $extra --out "$OUT/$name" --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  rc=$?
  t1=$(date +%s.%N)
  echo "$name: exit $rc, $(python3 -c "print(f'{$t1 - $t0:.0f} s')")"
  python3 - "$OUT/$name.json" <<'PY' || tail -3 "$OUT/$name.err"
import json, sys
r = json.load(open(sys.argv[1]))
steps = r["steps"]
num = lambda x: x if isinstance(x, (int, float)) else float(x)
ratio = lambda s: num(s["divergence"][s["worst"]]) / num(s["envelope"][s["worst"]])
w = max(steps, key=ratio)
o = r["first_outside"]
print(f"  {len(steps)} steps, {r['precision']} on {r['gemm_path']}, envelope K={r['envelope']['k']} x ratio {r['envelope']['ratio']}")
if o is None:
    print("  first outside: none")
else:
    print(f"  first outside: step {o['step']}, {o['tensor']}: {num(o['divergence']):.2e} > {num(o['envelope']):.2e} ({len(o['tensors'])} tensors outside)")
print(f"  worst divergence/envelope: {ratio(w):.3f} at step {w['step']} ({r['tensors'][w['worst']]['name']})")
print(f"  largest divergence {max(max(map(num, s['divergence'])) for s in steps):.2e}, "
      f"largest reference {max(max(map(num, s['reference'])) for s in steps):.2e}, "
      f"largest envelope {max(max(map(num, s['envelope'])) for s in steps):.2e}")
last = steps[-1]
print(f"  last loss: gpu {num(last['loss_gpu']):.4f}  cpu32 {num(last['loss_cpu32']):.4f}  cpu64 {num(last['loss_cpu64']):.4f}")
for n in r["notes"]:
    print(f"  note: {n}")
PY
done
