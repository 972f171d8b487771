#!/usr/bin/env bash
# On the H200 host (through the device tool): `dualscope scan` of one file on
# the Vulkan engine at T = 512, for the `small` and `bench` configs, in f32
# and in the mixed f16 step; prints each run's tokens per second (the whole
# scan's and the engine's forward + backward alone) and peak memory, and keeps
# each run's scan.json under OUT. Usage:
#   bench/scan_h200.sh BIN DATA OUT [MAX_WINDOWS]     (CONFIGS="small bench" by default)
# MAX_WINDOWS (default 8000, 4M tokens) caps each run so the four fit the device's
# time limit; 0 scans the whole file.
set -uo pipefail
BIN=$1; DATA=$2; OUT=$3; MAXW=${4:-8000}
mkdir -p "$OUT"
cap=(); [ "$MAXW" != 0 ] && cap=(--max-windows "$MAXW")
printf '%-8s %-6s %6s %12s %12s %10s %9s\n' config prec batch tokens/s engine_tok/s windows peak_MB
for config in ${CONFIGS:-small bench}; do
  for prec in f32 f16; do
    tag=${config}_${prec}; dir="$OUT/$tag"; rm -rf "$dir"
    /usr/bin/time -v "$BIN" scan --data "$DATA" --config "$config" --engine gpu --precision "$prec" \
      --seq-len 512 --batch 16 --top 16 --out "$dir" --json "${cap[@]}" > "$OUT/$tag.json" 2> "$OUT/$tag.err"
    rc=$?
    rss=$(awk -F: '/Maximum resident/{print int($2/1024)}' "$OUT/$tag.err")
    if [ $rc -ne 0 ]; then echo "$tag: exit $rc: $(grep -m1 error: "$OUT/$tag.err")"; continue; fi
    python3 - "$OUT/$tag.json" "$config" "$prec" "$rss" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["report"]
print(f"{sys.argv[2]:<8} {sys.argv[3]:<6} {16:>6} {r['tokens_per_s']:>12.0f} {r['engine_tokens_per_s']:>12.0f} {r['done']:>10} {sys.argv[4]:>9}")
PY
  done
done
