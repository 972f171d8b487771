#!/bin/bash
# h200_captures.sh BIN OUT [PART...]   PART: train (default), scan
# The issue-17 "done when" run on the H200, on real text: the Python standard
# library's sources as JSON lines plus one document of a rare byte (0x01 × 600),
# a genuine data outlier among ordinary text.
#  train: a 300-step `train --precision f16` with the controller on and one
#         planted event of each kind, then `replay` on every capture it left
#         (bench/replay_captures.sh);
#  scan:  `scan` of the same file on the GPU (small, T=256), then `replay` of
#         its top-ranked window.
set -u
BIN=$1; OUT=$2; shift 2
PARTS=${*:-train}
mkdir -p "$OUT"
DATA=$OUT/pystdlib.jsonl
if [ ! -f "$DATA" ]; then
  python3 scripts/pystdlib_jsonl.py "$DATA"
  python3 -c 'import json; print(json.dumps({"text": "\u0001" * 600, "path": "outlier"}))' >> "$DATA"
fi
for part in $PARTS; do
  case $part in
    train)
      bash bench/replay_captures.sh "$BIN" "$OUT" 300 --config small --batch 16 --seq-len 256 \
        --inject nan@60 --inject spike@90 --inject transient@120 --inject f16_overflow@150 \
        --inject persistent@250 --capture-at 200
      grep -E "^step|capture:|trained" "$OUT/train.txt" | tail -30 ;;
    scan)
      d=$OUT/scan; rm -rf "$d"
      "$BIN" scan --data "$DATA" --config small --engine gpu --precision f32 --seq-len 256 --batch 16 --top 8 \
        --out "$d" --json > "$OUT/scan.json" 2> "$OUT/scan.err"
      echo "scan rc $?"
      python3 - "$OUT/scan.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rep = r["report"]
print({k: rep[k] for k in ("done", "windows", "tokens", "seconds", "tokens_per_s", "engine_tokens_per_s")})
for w in rep["ranking"][:8]:
    print("  ", json.dumps(w)[:300])
PY
      for c in "$d"/captures/step_*; do
        "$BIN" replay "$c" --json --out "$c.replay.json" > /dev/null 2> "$c.replay.err"
        python3 -c "import json,sys; v=json.load(open('$c.replay.json')); m=json.load(open('$c/capture.json')); print('$(basename $c)', m['reasons'][0][:90], '->', v['verdict'], '—', v['reason'][:160])" 2>/dev/null || tail -1 "$c.replay.err"
      done ;;
  esac
done
