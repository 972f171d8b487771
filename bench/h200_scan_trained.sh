#!/bin/bash
# h200_scan_trained.sh BIN OUT: train `small` for 300 steps on the Python
# sources plus one 0x01×600 document, scan the file with those weights on the
# GPU, and replay the three top-ranked windows (docs/triage.md, Scan).
set -u
BIN=$1; OUT=$2
mkdir -p "$OUT"; DATA=$OUT/pystdlib.jsonl
if [ ! -f "$DATA" ]; then
  python3 scripts/pystdlib_jsonl.py "$DATA"
  python3 -c 'import json; print(json.dumps({"text": "\u0001" * 600, "path": "outlier"}))' >> "$DATA"
fi
"$BIN" train --data "$DATA" --config small --batch 16 --seq-len 256 --engine gpu --steps 300 --out "$OUT/run" > "$OUT/train.txt" 2>&1
echo "train rc $?: $(tail -1 "$OUT/train.txt")"
d=$OUT/scan; rm -rf "$d"
"$BIN" scan --data "$DATA" --checkpoint "$OUT/run/last.safetensors" --engine gpu --seq-len 256 --batch 16 --top 8 \
  --out "$d" --json > "$OUT/scan.json" 2> "$OUT/scan.err"
echo "scan rc $?"
python3 - "$OUT/scan.json" "$DATA" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["report"]
docs = [json.loads(l).get("path") for l in open(sys.argv[2])]
print({k: r[k] for k in ("done", "windows", "tokens", "seconds", "tokens_per_s", "engine_tokens_per_s")})
for i, w in enumerate(r["ranking"]):
    o = w["origin"]; m = w["metrics"]
    print(f"  rank {i+1}: window {w['window']} {docs[o['document']]} offset {o['offset']} len {o['len']}: "
          f"max_grad {m['max_grad']:.3e} loss {m['loss']:.3f} max_logit {m['max_logit']:.2f} headroom {m['headroom']:.2f}")
PY
for c in $(ls -d "$d"/captures/step_* | head -3); do
  "$BIN" replay "$c" --json --out "$c.replay.json" > /dev/null 2> "$c.replay.err"
  python3 -c "import json; v=json.load(open('$c.replay.json')); print('$(basename $c)', '->', v['verdict'], '—', v['reason'][:200])" 2>/dev/null || tail -1 "$c.replay.err"
done
