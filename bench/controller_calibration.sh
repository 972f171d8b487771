#!/bin/bash
# controller_calibration.sh BIN OUT [STEPS] [SETTINGS...]
# Trains `bench` width, B=16 T=512, f16, on the Python standard library's
# sources (scripts/pystdlib_jsonl.py) once per controller setting and counts
# the controller's actions by kind (docs/training.md, "Calibration").
# A setting is NAME:FLAGS, e.g. "default:" or "off:--no-controller" or
# "z8:--gn-skip-z 8 --gn-spike-z 5".
set -u
BIN=$1; OUT=$2; STEPS=${3:-1500}; shift 3 || shift $#
mkdir -p "$OUT"
DATA=$OUT/pystdlib.jsonl
[ -f "$DATA" ] || python3 scripts/pystdlib_jsonl.py "$DATA"
[ $# -gt 0 ] || set -- "default:" "off:--no-controller"
for s in "$@"; do
  name=${s%%:*}; flags=${s#*:}
  for seed in ${SEEDS:-0}; do
    d=$OUT/run_${name}_s$seed; rm -rf "$d"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$BIN" train --data "$DATA" --config bench --batch 16 --seq-len 512 --precision f16 --engine gpu \
      --steps "$STEPS" --seed "$seed" --out "$d" --log-every 500 $flags > "$d.txt" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    python3 - "$d" "$name" "$seed" "$rc" "$t0" "$t1" <<'PY'
import json, sys, collections
d, name, seed, rc, t0, t1 = sys.argv[1:]
steps = [json.loads(l) for l in open(f"{d}/log.jsonl") if l.strip()]
acts = [json.loads(l) for l in open(f"{d}/controller.jsonl") if l.strip()]
kinds = collections.Counter(a["action"] for a in acts)
last = sum(s["loss"] for s in steps[-50:]) / max(1, len(steps[-50:]))
minf = min((a.get("lr_factor") for a in acts if a.get("lr_factor") is not None), default=1.0)
print(f"{name:>12} seed {seed} rc {rc}: {len(steps)} steps in {float(t1)-float(t0):.0f} s, "
      f"mean loss of the last 50 {last:.4f}, actions {len(acts)} {dict(kinds)}, lowest lr factor {minf}")
zs = sorted(s["risk_z"] for s in steps if s.get("risk_z") is not None)
if zs:
    q = lambda f: zs[min(len(zs) - 1, int(f * len(zs)))]
    above = {t: sum(z > t for z in zs) for t in (3.5, 4, 5, 6, 7, 8, 10, 12)}
    print(f"    risk z over {len(zs)} judged steps: median {q(0.5):.2f}, p99 {q(0.99):.2f}, max {zs[-1]:.2f}; "
          f"steps above z: {above}")
    worst = sorted((s for s in steps if s.get("risk_z") is not None), key=lambda s: -s["risk_z"])[:5]
    print("    largest: " + ", ".join(f"step {s['step']} z {s['risk_z']:.2f} ({s.get('risk_of')})" for s in worst))
for a in acts[:40]:
    print(f"    step {a['step']:>5} {a['action']}: {a['reason'][:150]}")
PY
  done
done
