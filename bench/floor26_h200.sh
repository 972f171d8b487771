#!/bin/bash
# On the device host: `bench`'s floor with the wavefronts' operand loads in it
# (session 26), everything from one run on one card, with PyTorch's best there:
#   - bench/device_speed.sh at `bench` (dualscope's CPU, f32 and mixed steps;
#     the PyTorch peer's CUDA graphs in f32, TF32 and AMP f16);
#   - DUALSCOPE_GRID_PROBE=1: the wavefronts with parts switched off, among
#     them `operand_loads_only` (the barrier, the step's inputs, the operands'
#     loads from L2, each waited for, the gates and the stores: all of an
#     interval but its products);
#   - DUALSCOPE_COOPMAT_PROBE=no_global: the products outside the wavefronts
#     without their global loads (their sum over `kernels_ms`).
# Prints one summary (also OUT/summary.txt); about three minutes.
# Usage: bench/floor26_h200.sh BIN OUT
set -uo pipefail
BIN=$1; OUT=$2
mkdir -p "$OUT"
SHAPES="--config bench" TORCH_MODES=graph TORCH_CPU=0 bench/device_speed.sh "$BIN" "$OUT/speed" > "$OUT/speed.txt" 2>&1
echo "device_speed: exit $?"
for p in "DUALSCOPE_GRID_PROBE=1 probe" "DUALSCOPE_COOPMAT_PROBE=no_global noglobal"; do
  set -- $p
  env "$1" "$BIN" bench --engine gpu --config bench --precision mixed --steps 20 --warmup 3 --json > "$OUT/$2.json" 2> "$OUT/$2.err"
  echo "$2: exit $?"
done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys, os
out = sys.argv[1]
print(open(os.path.join(out, "speed.txt")).read().strip())
top = json.load(open(os.path.join(out, "probe.json")))
g = top["engines"][0]
ng = json.load(open(os.path.join(out, "noglobal.json")))["engines"][0]
products = lambda e: sum(k["ms"] for k in e.get("kernels_ms", []) if k["kernel"].startswith("gemm"))
r = g["recurrence"]
f, b = r["fwd_wave_probe"], r["bwd_wave_probe"]
T = top["seq_len"]
nf, nb = T + 1, T + 2
print(f"step replayed {g['replay_median_ms']:.3f} ms; products {products(g):.3f}, without global loads {products(ng):.3f}")
for d in (f, b):
    for k in sorted(d):
        print(f"  {'fwd' if d is f else 'bwd'} {k:36s} {d[k]:7.3f} us/interval")
def rec(key_f, key_b):
    return (nf * f[key_f] + nb * b[key_b]) / 1e3
for label, kf, kb in [("products off", "no_products_us", "probe_no_products_us"),
                      ("operand loads, no products", "operand_loads_only_us", "operand_loads_only_us"),
                      ("products on zeros", "no_operand_loads_us", "probe_no_operand_loads_us"),
                      ("whole", "whole_us", "probe_whole_us")]:
    if kf in f and kb in b:
        x = rec(kf, kb)
        print(f"floor, wavefronts with {label}: {x:.3f} + products without global loads {products(ng):.3f} = {x + products(ng):.3f} ms")
PY
