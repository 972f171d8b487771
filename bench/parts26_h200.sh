#!/bin/bash
# On the device host: where the wavefronts' products spend their time (session
# 26). DUALSCOPE_GRID_PROBE=1 at `bench` and `small` times both wavefronts with
# parts of each interval switched off, now also the products' own parts on
# zero operands (no staging, no fragment loads, no multiply-adds, no fragment
# stores; bench.rs's PRODUCT_PARTS) and the operands loaded straight into
# fragments; optionally TESTBIN (tests/vk_mixed.rs built) under layer 1.4.309
# (.device/vvl14.deb). Prints one summary (also OUT/summary.txt); about two
# minutes. (Session 26's call 1 ran it with the straight-loads variant, version
# 60, and an A/B of it under DUALSCOPE_WAVE_DIRECT: both removed since.)
# Usage: bench/parts26_h200.sh BIN OUT [TESTBIN]
set -uo pipefail
BIN=$1; OUT=$2; TESTBIN=${3:-}
mkdir -p "$OUT"
for c in bench small; do
  DUALSCOPE_GRID_PROBE=1 "$BIN" bench --engine gpu --config $c --precision mixed --steps 20 --warmup 3 --json \
    > "$OUT/$c.json" 2> "$OUT/$c.err"
  echo "$c: exit $?"
done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys, os
out = sys.argv[1]
for shape in ["bench", "small"]:
    try:
        g = json.load(open(os.path.join(out, shape + ".json")))["engines"][0]
    except Exception as e:
        print(f"{shape}: unreadable ({e})"); continue
    r = g.get("recurrence", {})
    print(f"{shape}: step replayed {g.get('replay_median_ms')} ms; barrier {r.get('barrier_us')} us")
    for d in ["fwd_wave_probe", "bwd_wave_probe"]:
        p = r.get(d) or {}
        for k in sorted(p):
            print(f"  {d[:3]} {k:36s} {p[k]:7.3f} us/interval")
PY
if [ -n "$TESTBIN" ]; then
  mkdir -p /tmp/v14 && dpkg -x .device/vvl14.deb /tmp/v14
  VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu \
    DUALSCOPE_VK_VALIDATION=core "$TESTBIN" --test-threads 1 > "$OUT/vk_mixed.txt" 2>&1
  echo "vk_mixed under the layer: exit $?" | tee -a "$OUT/summary.txt"
  grep -E "^test |test result" "$OUT/vk_mixed.txt" | tee -a "$OUT/summary.txt"
fi
