#!/bin/bash
# On the device host: `dualscope ladder` on one long row of real text (B = 1)
# at T = 4096 and T = 16384, in f32 and in the mixed step (f16), in isolated
# and chained mode, at the `bench` width; each run's JSON report is
# OUT/T<len>_<precision>_<mode>.json (stderr beside it as .err) and one line
# per run says its exit code, the rungs and cases passed, the worst ratio of
# a case's rel_l2 to its tolerance (and which case), the end-to-end gate and
# the wall time. docs/long-rows.md records what the H200 printed.
# Usage: bench/longrows_h200.sh BIN DATA OUT
# Env: CONFIG (default bench), LENS (default "4096 16384"), PRECISIONS
# (default "f32 f16"), MODES (default "isolated chained"), OFFSET (default
# 100000: the row's first token in DATA).
set -uo pipefail
BIN=$1; DATA=$2; OUT=$3
CONFIG=${CONFIG:-bench}
LENS=${LENS:-4096 16384}
PRECISIONS=${PRECISIONS:-f32 f16}
MODES=${MODES:-isolated chained}
OFFSET=${OFFSET:-100000}
mkdir -p "$OUT"
for len in $LENS; do
  for p in $PRECISIONS; do
    for mode in $MODES; do
      name="T${len}_${p}_${mode}"
      t0=$(date +%s.%N)
      "$BIN" ladder --config "$CONFIG" --data "$DATA" --offset "$OFFSET" --len "$len" \
        --precision "$p" --mode "$mode" --json > "$OUT/$name.json" 2> "$OUT/$name.err"
      rc=$?
      t1=$(date +%s.%N)
      python3 - "$OUT/$name.json" "$name" "$rc" "$t0" "$t1" <<'PY' || { echo "$name: exit $rc, no report; stderr:"; tail -3 "$OUT/$name.err"; }
import json, sys
path, name, rc, t0, t1 = sys.argv[1:]
r = json.load(open(path))
s = r["summary"]
num = lambda x: x if isinstance(x, (int, float)) else float("inf")
worst, where = 0.0, "-"
for rung in r["rungs"]:
    for c in rung["cases"]:
        tol = num(c["tolerance"])
        ratio = num(c["rel_l2"]) / tol if tol > 0 else (0.0 if num(c["rel_l2"]) == 0 else float("inf"))
        if ratio > worst:
            worst, where = ratio, f"{rung['id']}:{c['name']}"
e = r.get("end_to_end") or {}
gate = f"end-to-end {e['status']} (loss rel {num(e['loss_rel_err']):.1e} / {num(e['loss_tolerance']):.1e})" if e else "end-to-end -"
print(f"{name}: exit {rc}, {float(t1) - float(t0):.0f} s; rungs {s['rungs']['pass']} pass {s['rungs']['fail']} fail; "
      f"cases {s['cases']['pass']}/{sum(s['cases'].values())} pass; worst rel_l2/tol {worst:.3f} ({where}); {gate}; "
      f"validation errors {(r.get('validation') or {}).get('errors', '-')}; status {r['status']}")
PY
    done
  done
done
