#!/bin/bash
# On the device host: `dualscope ladder` on one long row of real text (B = 1)
# at T = 4096 and T = 16384, in f32 and in the mixed step (f16), in isolated
# and chained mode, at the `bench` width. Few files come back from the host,
# so every run's JSON report is one line of OUT/reports.jsonl (with "run":
# its name and "exit": its exit code), the runs' stderr goes to
# OUT/stderr.log, and OUT/summary.txt holds the lines printed: per run its
# exit code, wall time, rungs and cases passed, the worst ratio of a case's
# rel_l2 to its tolerance (and which case), the end-to-end gate, the
# validation errors and the status. docs/long-rows.md records the H200's.
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
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for len in $LENS; do
  for p in $PRECISIONS; do
    for mode in $MODES; do
      name="T${len}_${p}_${mode}"
      echo "== $name" >> "$OUT/stderr.log"
      t0=$(date +%s.%N)
      "$BIN" ladder --config "$CONFIG" --data "$DATA" --offset "$OFFSET" --len "$len" \
        --precision "$p" --mode "$mode" --json > "$tmp" 2>> "$OUT/stderr.log"
      rc=$?
      t1=$(date +%s.%N)
      python3 - "$tmp" "$name" "$rc" "$t0" "$t1" "$OUT/reports.jsonl" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
path, name, rc, t0, t1, reports = sys.argv[1:]
wall = float(t1) - float(t0)
try:
    r = json.load(open(path))
except (OSError, ValueError):
    print(f"{name}: exit {rc}, {wall:.0f} s, no report (see stderr.log)")
    sys.exit(0)
r["run"], r["exit"], r["wall_s"] = name, int(rc), wall
with open(reports, "a") as f:
    f.write(json.dumps(r) + "\n")
s = r["summary"]
num = lambda x: x if isinstance(x, (int, float)) else float("inf")
worst, where = 0.0, "-"
for rung in r["rungs"]:
    for c in rung["cases"]:
        tol, err = num(c["tolerance"]), num(c["rel_l2"])
        ratio = err / tol if tol > 0 else (0.0 if err == 0 else float("inf"))
        if ratio > worst:
            worst, where = ratio, f"{rung['id']}:{c['name']}"
e = r.get("end_to_end") or {}
gate = f"end-to-end {e['status']} (loss rel {num(e['loss_rel_err']):.1e} / {num(e['loss_tolerance']):.1e})" if e else "end-to-end -"
cases = s["cases"]
print(f"{name}: exit {rc}, {wall:.0f} s; rungs {s['rungs']['pass']} pass {s['rungs']['fail']} fail; "
      f"cases {cases['pass']}/{sum(cases.values())} pass; worst rel_l2/tol {worst:.3f} ({where}); {gate}; "
      f"validation errors {(r.get('validation') or {}).get('errors', '-')}; status {r['status']}")
PY
    done
  done
done
