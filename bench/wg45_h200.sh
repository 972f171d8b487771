#!/bin/bash
# On the device host: where the one-workgroup recurrences' steps go after
# version 44 (docs/speed.md "Round 2e"): `bench --precision mixed` with
# DUALSCOPE_WG=1 DUALSCOPE_GRID_PROBE=1 (recurrence.wg_probe: layer 0's
# forward and backward kernels with parts switched off, µs per step) at
# `small` (H = 128, B = 8), B = 16 and H = 64; then the chained f16 ladder at
# `small` with the kernels, and optionally TESTBIN's coopmat tests
# (`cargo test --release --no-run --test vk_mixed`).
# Usage: bench/wg45_h200.sh BIN OUT [TESTBIN]
set -uo pipefail
BIN=$1; OUT=$2; TESTBIN=${3:-}
mkdir -p "$OUT"
for c in "128:8" "128:16" "64:8"; do
  h=${c%%:*}; b=${c#*:}; cfg="$OUT/h${h}_b$b.json"
  printf '{"vocab":256,"d_embed":64,"hidden":%s,"layers":2,"attn_dim":64,"heads":4,"window":32,"batch":%s,"seq_len":128}\n' "$h" "$b" > "$cfg"
  f="$OUT/probe-h${h}-b$b.json"
  DUALSCOPE_WG=1 DUALSCOPE_GRID_PROBE=1 $BIN bench --engine gpu --config "$cfg" --precision mixed --steps 10 --warmup 3 --json > "$f" 2> "${f%.json}.err"
  python3 bench/bench_summary.py "$f" "H=$h B=$b WG=1"
  python3 - "$f" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
rec = next((g.get("recurrence") or {} for g in v["engines"] if g.get("engine") != "cpu"), {})
for k, us in sorted((rec.get("wg_probe") or {}).items()):
    print(f"        {k:28s} {us:7.2f} us")
PY
done
DUALSCOPE_WG=1 $BIN ladder --config small --precision f16 --mode chained --json > "$OUT/ladder-small.json" 2> "$OUT/ladder-small.err"
python3 bench/ladder_summary.py "$OUT/ladder-small.json" "small WG=1: exit $?"
if [ -n "$TESTBIN" ]; then
  $TESTBIN --test-threads 1 coopmat 2>&1 | grep -E "^test |test result|panicked" | tee "$OUT/vk_mixed.txt"
fi
