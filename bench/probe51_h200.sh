#!/bin/bash
# On the device host, session 18: where the wavefronts' intervals go
# (DUALSCOPE_GRID_PROBE=1: `recurrence.fwd_wave_probe` and `bwd_wave_probe`,
# µs per interval with parts switched off) at bench, small and B=1 T=512, the
# mixed step; the binary against the one before (its step, old new new old,
# bench mixed and B=1 T=512: the probes' switches must cost nothing); and its
# ladders under validation layer 1.4.309 (small and bench, B=1 T=512, B=64).
# Usage: bench/probe51_h200.sh OLD_BIN NEW_BIN OUT
set -uo pipefail
OLD=$1; NEW=$2; OUT=$3
mkdir -p "$OUT/probe" "$OUT/ab"
for s in "bench:--config bench" "small:--config small" "b1t512:--config bench --batch 1 --seq-len 512"; do
  tag=${s%%:*}; args=${s#*:}
  DUALSCOPE_GRID_PROBE=1 $NEW bench --engine gpu --precision mixed --steps 10 --warmup 3 --json $args \
    > "$OUT/probe/$tag.json" 2> "$OUT/probe/$tag.err"
  python3 - "$OUT/probe/$tag.json" "$tag" <<'PY'
import json, sys
g = [e for e in json.load(open(sys.argv[1]))["engines"] if e["engine"] == "gpu"][0]
r = g["recurrence"]
for k in ("fwd_wave_probe", "bwd_wave_probe"):
    print(sys.argv[2], k, {a: round(b, 2) for a, b in (r.get(k) or {}).items()})
PY
done
SHAPES="bench:--config bench;b1t512:--config bench --batch 1 --seq-len 512" bench/ab_mixed_h200.sh "$OLD" "$NEW" "$OUT/ab"
bench/validate_h200.sh "$NEW" core "$OUT/val" ladders shapes > /dev/null 2>&1
cat "$OUT/val/summary.txt"
