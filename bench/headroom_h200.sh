#!/bin/bash
# On the device host: `dualscope ladder --json` at the `bench` width on one
# row of real text (B=1, T=4096, from token offset OFFSET, default 0) in the
# mixed step (`--precision f16`), isolated (and, if asked, chained, or f32 for
# "would this run in f16?"); prints each run's status and wall time, the ten
# tensors with the least f16 headroom (bits, the lower of CPU and GPU), the
# ten with the largest subnormal share, and the tensors the ladder warned
# about (docs/headroom.md). Each run's report is OUT/NAME.json.
# Usage: bench/headroom_h200.sh BIN DATA OUT [RUN...]   (RUN: f16 chained-f16 f32; default f16)
set -uo pipefail
BIN=$1; DATA=$2; OUT=$3; shift 3
RUNS=${*:-f16}
OFFSET=${OFFSET:-0}
mkdir -p "$OUT"
for name in $RUNS; do
  case $name in
    f16) extra="--precision f16 --mode isolated" ;;
    chained-f16) extra="--precision f16 --mode chained" ;;
    f32) extra="--precision f32 --mode isolated" ;;
    *) echo "unknown run $name (f16, chained-f16, f32)"; exit 2 ;;
  esac
  t0=$(date +%s.%N)
  $BIN ladder --config bench --data "$DATA" --offset "$OFFSET" --len 4096 $extra --json --out "$OUT/$name.json" > /dev/null 2> "$OUT/$name.err"
  rc=$?
  t1=$(date +%s.%N)
  echo "$name: exit $rc, $(python3 -c "print(f'{$t1 - $t0:.0f} s')")"
  python3 - "$OUT/$name.json" <<'PY' || tail -3 "$OUT/$name.err"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"  {r['precision']} {r['mode']} on {r['gemm_path']}, batch {r['batch']['rows']}x{r['batch']['seq_len']} ({r['batch']['source']}); status {r['status']}; summary {r['summary']['cases']}")
rows = []
for rung in r["rungs"]:
    for c in rung["cases"]:
        h = c.get("headroom")
        # The optimizer's f32 state and the synthetic attention stress case are left out (docs/headroom.md).
        if not h or rung["id"] == "optim" or "(stress:" in c["name"]:
            continue
        bits = [s["headroom_bits"] for s in (h["cpu"], h["gpu"]) if s["headroom_bits"] is not None]
        rows.append((rung["id"], c["name"], h["scale"], min(bits) if bits else float("inf"),
                     max(h["cpu"]["subnormal_share"], h["gpu"]["subnormal_share"]),
                     max(h["cpu"]["zero_share"], h["gpu"]["zero_share"]), c["status"],
                     [n for n in c["notes"] if n.startswith("f16 headroom:")]))
print(f"  {len(rows)} forward and backward tensors with headroom figures")
print("  least headroom (bits = log2(65504 / max|x*s|), lower of CPU and GPU):")
for rung, name, s, bits, sub, zero, st, _ in sorted(rows, key=lambda x: x[3])[:10]:
    print(f"    {bits:8.2f} bits  subnormal {100*sub:6.2f}%  zeros {100*zero:6.2f}%  scale {s:<8g} {rung:<9} {name}")
print("  largest subnormal share (non-zero |x*s| < 2^-14):")
for rung, name, s, bits, sub, zero, st, _ in sorted(rows, key=lambda x: -x[4])[:10]:
    print(f"    {100*sub:6.2f}%  {bits:8.2f} bits  scale {s:<8g} {rung:<9} {name}")
warned = [x for x in rows if x[7]]
print(f"  warned: {len(warned)}")
for rung, name, *_rest, notes in warned:
    for n in notes:
        print(f"    {rung}: {n}")
PY
done
