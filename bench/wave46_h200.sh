#!/bin/bash
# On the device host: the wavefronts with their products as FMAs
# (DUALSCOPE_WAVE_SCALAR=1, gru_*_wave_sc_nc) against the cooperative-matrix
# ones (=0), the mixed step at bench width for a few batch sizes, interleaved
# 0 1 1 0 at B = 1 T = 512 and 0 1 elsewhere; the backward wavefront's probe
# at B = 1 (recurrence.bwd_wave_probe, fma_products among its parts); then,
# with the default choice, the tests TESTBINS name and the f16 ladders at
# B = 1 T = 512 and B = 2 T = 300 under validation layer 1.4.309
# (.device/vvl14.deb), chained and isolated.
# Usage: bench/wave46_h200.sh BIN OUT [TESTBIN...]
# With ONLY=checks, only the tests and the ladders.
set -uo pipefail
BIN=$1; OUT=$2; shift 2
mkdir -p "$OUT"
ab() { # tag, order, bench args...
  local tag=$1 order=$2; shift 2
  local i=0
  for s in $order; do
    i=$((i + 1)); f="$OUT/${tag}_s${s}_$i.json"
    DUALSCOPE_WAVE_SCALAR=$s $BIN bench --engine gpu --precision mixed --steps 20 --warmup 3 --json "$@" > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "$tag WAVE_SCALAR=$s"
  done
}
[ "${ONLY:-}" = checks ] || {
ab b1t512 "0 1 1 0" --config bench --batch 1 --seq-len 512
ab b2t512 "0 1" --config bench --batch 2 --seq-len 512
ab b4t512 "0 1" --config bench --batch 4 --seq-len 512
ab b8t256 "0 1" --config bench --batch 8 --seq-len 256
ab small "0 1" --config small
ab b1t4096 "0 1" --config bench --batch 1 --seq-len 4096
f="$OUT/probe-b1t512.json"
DUALSCOPE_GRID_PROBE=1 $BIN bench --engine gpu --precision mixed --steps 5 --warmup 2 --json --config bench --batch 1 --seq-len 512 > "$f" 2> "${f%.json}.err"
python3 - "$f" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
rec = next((g.get("recurrence") or {} for g in v["engines"] if g.get("engine") != "cpu"), {})
for name in ("bwd_wave_probe", "fwd_step_probe"):
    for k, us in sorted((rec.get(name) or {}).items()):
        print(f"  {name} {k:28s} {us:7.2f} us")
PY
}
for t in "$@"; do
  $t --test-threads 1 --nocapture 2>&1 | grep -E "^test |test result|panicked|rel L2" | tee -a "$OUT/tests.txt" | grep -vE "rel L2"
done
mkdir -p /tmp/v14 && dpkg -x .device/vvl14.deb /tmp/v14
for shape in "b1t512:1:512" "b2t300:2:300"; do
  tag=${shape%%:*}; bt=${shape#*:}; cfg="$OUT/$tag.json"
  printf '{"vocab":256,"d_embed":256,"hidden":512,"layers":2,"attn_dim":256,"heads":4,"window":128,"batch":%s,"seq_len":%s}\n' "${bt%%:*}" "${bt#*:}" > "$cfg"
  args="--config $cfg"
  for md in chained isolated; do
    f="$OUT/ladder-$tag-$md.json"
    VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu \
      DUALSCOPE_VK_VALIDATION=core DUALSCOPE_WAVE_SCALAR=1 $BIN ladder $args --precision f16 --mode $md --json > "$f" 2> "${f%.json}.err"
    python3 bench/ladder_summary.py "$f" "$tag f16 $md WAVE_SCALAR=1 validation core: exit $?"
    grep -h '^dualscope: validation' "${f%.json}.err" | tail -1
  done
done
