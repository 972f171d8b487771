#!/bin/bash
# On the device host: `dualscope growth` at the `bench` width (B = 1) on one
# long row of a real text, T = 4096 and T = 16384, the GPU in f32 and in the
# mixed step (f16), and for contrast f32 with the GPU's token at T/2 changed;
# prints each run's summary: per series the worst difference / envelope and
# where, the first position outside (or none), the largest difference and
# envelope, and the wall time. Each run's report is OUT/NAME.json (every
# position of every series), its printed summary OUT/NAME.txt.
# Usage: bench/growth_h200.sh BIN DATA OUT [RUN...]
#   RUN: f32-4096 f16-4096 f32-16384 f16-16384 planted-f32-4096 (default all)
# Extra flags for every run (a trained checkpoint: --checkpoint CKPT) in GROWTH_ARGS.
# Expected (issue 18, the operand-rounded f16 reference): f16-16384 and f16-4096
# exit 0 (none outside), their "reference rounds the operands of:" line naming
# gru.l0.rec=f16 and gru.l0.rec.bwd=f16 (the cooperative-matrix recurrences);
# planted-f32-4096 exit 1 at 2048.
set -uo pipefail
BIN=$1; DATA=$2; OUT=$3; shift 3
RUNS=${*:-f32-4096 f16-4096 f32-16384 f16-16384 planted-f32-4096}
EXTRA=${GROWTH_ARGS:---config bench}
mkdir -p "$OUT"
for name in $RUNS; do
  case $name in
    f32-4096) extra="--precision f32 --len 4096" ;;
    f16-4096) extra="--precision f16 --len 4096" ;;
    f32-16384) extra="--precision f32 --len 16384" ;;
    f16-16384) extra="--precision f16 --len 16384" ;;
    planted-f32-4096) extra="--precision f32 --len 4096 --plant-token-at 2048" ;;
    *) echo "unknown run $name (f32-4096 f16-4096 f32-16384 f16-16384 planted-f32-4096)"; exit 2 ;;
  esac
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  $BIN growth --data "$DATA" $EXTRA $extra --out "$OUT/$name.json" > "$OUT/$name.txt" 2> "$OUT/$name.err"
  rc=$?
  t1=$(date +%s.%N)
  echo "$name: exit $rc (0: none outside, 1: one outside), $(python3 -c "print(f'{$t1 - $t0:.0f} s')")"
  if [ ! -s "$OUT/$name.json" ]; then tail -3 "$OUT/$name.err"; continue; fi
  sed -n '1,2p;/^planted:/p;/^reference rounds/p' "$OUT/$name.txt" | sed 's/^/  /'
  python3 - "$OUT/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
num = lambda x: x if isinstance(x, (int, float)) else float(x)
for s in r["series"]:
    d = list(map(num, s["difference"])); e = list(map(num, s["envelope"])); ref = list(map(num, s["reference"]))
    rr = list(map(num, s.get("reference_rounded", [])))
    rounded = f", max rounded-weights ref {max(rr):.2e}" if rr else ""
    first = s["first_outside"]
    print(f"  {s['name']:<12} {s['direction']:<8} worst {num(s['worst_ratio']):8.3f} x envelope at {s['worst']:>6}; "
          f"max diff {max(d):.2e}, max ref {max(ref):.2e}{rounded}, envelope {min(e):.1e}..{max(e):.1e}; "
          f"outside from {'none' if first is None else first} ({s['n_outside']} positions)")
o = r["first_outside"]
print("  first outside: " + ("none" if o is None else
      f"{o['position']} ({o['series']}: {num(o['difference']):.2e} > {num(o['envelope']):.2e})"))
for n in r["notes"]:
    print(f"  note: {n}")
PY
done
