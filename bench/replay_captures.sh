#!/bin/bash
# replay_captures.sh BIN OUT [STEPS] [TRAIN FLAGS...]
# The issue's "done when" on the H200: a `train --precision f16` run on real
# text (the Python standard library's sources, scripts/pystdlib_jsonl.py)
# with the controller on and planted events, then `replay` on every capture
# it left; prints one line per capture (step, triggers, planted, verdict,
# reason) and keeps each report beside it (OUT/run/replays/step_NNNNNN.json).
# Train flags default to the bench shape with one event of each kind; pass
# others after STEPS. Needs `train` to write captures (OUT/run/captures/).
set -u
BIN=$1; OUT=$2; STEPS=${3:-300}; shift 3 || shift $#
mkdir -p "$OUT"
DATA=$OUT/pystdlib.jsonl
[ -f "$DATA" ] || python3 scripts/pystdlib_jsonl.py "$DATA"
[ $# -gt 0 ] || set -- --config bench --batch 16 --seq-len 512 \
  --inject nan@60 --inject spike@90 --inject transient@120 --inject f16_overflow@150 --inject persistent@250
RUN=$OUT/run; rm -rf "$RUN"
"$BIN" train --data "$DATA" --precision f16 --engine gpu --steps "$STEPS" --out "$RUN" --log-every 50 "$@" \
  > "$OUT/train.txt" 2>&1
echo "train rc $? ($(ls -d "$RUN"/captures/step_* 2>/dev/null | wc -l) captures)"
mkdir -p "$RUN/replays"
for c in "$RUN"/captures/step_*; do
  [ -d "$c" ] || continue
  r=$RUN/replays/$(basename "$c").json
  t0=$(date +%s.%N)
  "$BIN" replay "$c" --json --out "$r" > /dev/null 2> "$r.err"
  rc=$?
  t1=$(date +%s.%N)
  python3 - "$c" "$r" "$rc" "$t0" "$t1" <<'PY'
import json, sys
c, r, rc, t0, t1 = sys.argv[1:]
m = json.load(open(f"{c}/capture.json"))
head = f"step {m['step']:>5} [{','.join(m['triggers'])}] planted {m.get('planted')}: rc {rc}, {float(t1)-float(t0):.1f} s"
try:
    v = json.load(open(r))
except Exception:
    print(head + ": " + open(r + ".err").read().strip().splitlines()[-1]); sys.exit()
print(f"{head}: {v['verdict']} (rule {v['rule']}) — {v['reason'][:200]}")
PY
done
