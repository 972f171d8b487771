#!/bin/bash
# On the device host: the step of two binaries, old new new old, at each shape
# of SHAPES (';'-separated TAG:PRECISION:ARGS), with the per-kernel medians of
# the kernels whose names match KERNELS (a regex; default the attention's):
# replayed medians of 20 steps, first losses. Usage:
#   bench/ab_kernels_h200.sh OLD_BIN NEW_BIN OUT
set -uo pipefail
OLD=$1; NEW=$2; OUT=$3
mkdir -p "$OUT"
SHAPES=${SHAPES:-"bench:mixed:--config bench;bench:f32:--config bench;b64:mixed:--config bench --batch 64 --seq-len 256;b1t4096:mixed:--config bench --batch 1 --seq-len 4096"}
export KERNELS=${KERNELS:-attn}
IFS=';' read -ra shapes <<< "$SHAPES"
for s in "${shapes[@]}"; do
  IFS=':' read -r tag prec args <<< "$s"; i=0
  for which in old new new old; do
    i=$((i + 1)); f="$OUT/${tag}_${prec}_${which}_$i.json"; bin=$OLD; [ $which = new ] && bin=$NEW
    $bin bench --engine gpu --precision $prec --steps 20 --warmup 3 --json $args > "$f" 2> "${f%.json}.err"
    python3 - "$f" "$tag $prec $which" <<'PY' | tee -a "$OUT/summary.txt"
import json, os, re, sys
f = lambda x: "-" if x is None else f"{x:.3f}"
try:
    g = [e for e in json.load(open(sys.argv[1]))["engines"] if e.get("engine") == "gpu"][0]
    ks = " ".join(f"{k['kernel']} {k['ms']:.4f}" for k in g.get("kernels_ms", []) if re.search(os.environ["KERNELS"], k["kernel"]))
    print(f"{sys.argv[2]:<22} replay {f(g.get('replay_median_ms'))} device {f(g.get('replay_device_median_ms'))}"
          f" first loss {g.get('first_loss')} | {ks}")
except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
    print(f"{sys.argv[2]}: no report ({e})")
PY
  done
done
