#!/bin/bash
# On the device host: the floors of the mixed step where issue 19's 2× target
# is missed without a measured floor (B=64 T=256 and `bench`), and again
# `small`'s (probe 51's, measured before version 58).
#   - DUALSCOPE_GRID_PROBE=1: the recurrences with parts switched off, µs per
#     step or interval: at B=64 the per-layer cooperative-matrix grid kernels
#     (the wavefronts do not fit; `recurrence.grid_cm_probe`, layer 0), at
#     `bench` the two wavefronts (`fwd_wave_probe`, `bwd_wave_probe`); and the
#     barrier alone (`recurrence.floor_ms`). The step itself is timed first.
#   - DUALSCOPE_COOPMAT_PROBE=no_global: the products without their global
#     loads (their sum over `kernels_ms`, every kernel since session 25).
# Prints one summary (also OUT/summary.txt). About a minute on the H200.
# Usage: bench/floor64_h200.sh BIN OUT
set -uo pipefail
BIN=$1; OUT=$2
mkdir -p "$OUT"
B64="--config bench/configs/bench_b64.json"
BENCH="--config bench"
one() { # name, env assignment, shape args...
  local name=$1 envset=$2; shift 2
  env "$envset" "$BIN" bench --engine gpu "$@" --precision mixed --steps 20 --warmup 3 --json \
    > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "$name: exit $?"
}
one b64_probe DUALSCOPE_GRID_PROBE=1 $B64
one b64_noglobal DUALSCOPE_COOPMAT_PROBE=no_global $B64
one bench_probe DUALSCOPE_GRID_PROBE=1 $BENCH
one bench_noglobal DUALSCOPE_COOPMAT_PROBE=no_global $BENCH
one small_probe DUALSCOPE_GRID_PROBE=1 --config small
one small_noglobal DUALSCOPE_COOPMAT_PROBE=no_global --config small
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys, os
out = sys.argv[1]
def eng(name):
    try:
        return json.load(open(os.path.join(out, name + ".json")))["engines"][0]
    except Exception as e:
        print(f"{name}: unreadable ({e})")
        return None
def products(g):
    return sum(k["ms"] for k in g.get("kernels_ms", []) if k["kernel"].startswith("gemm"))
def rec(g):
    return sum(k["ms"] for k in g.get("kernels_ms", []) if "recurrence" in k["kernel"])
for shape in ["b64", "bench", "small"]:
    plain, ng = eng(shape + "_probe"), eng(shape + "_noglobal")
    if plain and ng:
        print(f"{shape}: step replayed {plain['replay_median_ms']:.3f} ms; recurrences {rec(plain):.3f}; "
              f"products {products(plain):.3f} ms, without global loads {products(ng):.3f} ms")
g = eng("b64_probe")
if g:
    r = g.get("recurrence", {})
    T = 256
    print(f"b64: barrier {r.get('barrier_us')} us x {r.get('barriers_per_step')} = floor {r.get('floor_ms')} ms")
    p = r.get("grid_cm_probe") or {}
    for k in sorted(p):
        print(f"  {k:32s} {p[k]:7.3f} us/step")
    layers = 2
    if "fwd_no_products_us" in p and "bwd_no_products_us" in p:
        nop = layers * T * (p["fwd_no_products_us"] + p["bwd_no_products_us"]) / 1e3
        whole = layers * T * (p.get("fwd_whole_us", 0) + p.get("bwd_whole_us", 0)) / 1e3
        print(f"b64 recurrences from the probe: whole {whole:.3f} ms, products off {nop:.3f} ms")
        ng = eng("b64_noglobal")
        if ng:
            print(f"b64 floor: recurrences without products {nop:.3f} + products without global loads "
                  f"{products(ng):.3f} = {nop + products(ng):.3f} ms")
        if "fwd_no_operand_loads_us" in p and "bwd_no_operand_loads_us" in p:
            nol = layers * T * (p["fwd_no_operand_loads_us"] + p["bwd_no_operand_loads_us"]) / 1e3
            print(f"b64 recurrences without their operand loads (products on zeros): {nol:.3f} ms")
for shape, T in [("bench", 256), ("small", 128)]:
    g = eng(shape + "_probe")
    if not g:
        continue
    r = g.get("recurrence", {})
    print(f"{shape}: barrier {r.get('barrier_us')} us x {r.get('barriers_per_step')} = floor {r.get('floor_ms')} ms")
    fw, bw = r.get("fwd_wave_probe") or {}, r.get("bwd_wave_probe") or {}
    for name, d in [("fwd", fw), ("bwd", bw)]:
        for k in sorted(d):
            print(f"  {name}_{k:28s} {d[k]:7.3f} us/interval")
    ng = eng(shape + "_noglobal")
    # T + 1 forward intervals, T + 2 backward (FWD_WAVE_LAG, BWD_WAVE_LAG).
    # The backward's parts on its probe variant where measured (session 26),
    # the variant the step runs; its operand loads alone there only.
    for part in ["no_products_us", "operand_loads_only_us", "no_operand_loads_us", "whole_us"]:
        bpart = "probe_" + part if "probe_" + part in bw else part
        if part in fw and bpart in bw:
            wave = ((T + 1) * fw[part] + (T + 2) * bw[bpart]) / 1e3
            extra = f" + products without global loads {products(ng):.3f} = {wave + products(ng):.3f} ms" if ng else ""
            print(f"{shape} wavefronts, {part[:-3]}: {wave:.3f} ms{extra}")
PY
