#!/bin/bash
# On the device host: the f32 products, the 128x64 kernel (gemm_f32.comp,
# `tiled`) against the 128x128 one (gemm_f32_big.comp, `big`).
#  1. Correctness on the device first: the ladder's gemm rung at `bench` in f32
#     with each kernel (DUALSCOPE_GEMM_F32=tiled|big), the whole f32 ladder at
#     `small` with the new one, and, when a test binary
#     of tests/vk_gemm.rs is given as TESTBIN, its big-kernel test on the H200.
#  2. `gemm-bench` on every product shape of the f32 step at `bench` (split-K
#     as the step splits them), old and new side by side (TFLOP/s, median of 20).
#  3. `bench --engine gpu --config bench` (f32) with DUALSCOPE_GEMM_F32 at
#     tiled and at big: wall and device medians, recorded and replayed, and the
#     GEMM dispatches' per-kernel medians (ms).
# Under 4 minutes on the H200. Every run's output is in OUT/ (the ladders'
# tables in OUT/ladder-*.txt: exit 0 means every rung passed).
# Usage: bench/gemm19_h200.sh BIN OUT [TESTBIN]
set -uo pipefail
BIN=$1; OUT=$2; TESTBIN=${3:-}
mkdir -p "$OUT"
export DUALSCOPE_VK_VALIDATION=${DUALSCOPE_VK_VALIDATION:-0}

echo "== correctness"
# The gemm rung at `bench` with each kernel, then every rung at `small` with
# the new one (the default), validation on.
for kern in tiled big; do
  DUALSCOPE_GEMM_F32=$kern DUALSCOPE_VK_VALIDATION=1 timeout 60 $BIN ladder --config bench --rungs gemm \
    --precision f32 > "$OUT/ladder-bench-$kern.txt" 2>&1
  echo "ladder --config bench --rungs gemm, f32, DUALSCOPE_GEMM_F32=$kern: exit $?"
done
DUALSCOPE_VK_VALIDATION=1 timeout 60 $BIN ladder --config small --precision f32 > "$OUT/ladder-small-big.txt" 2>&1
echo "ladder --config small (every rung), f32, default kernel: exit $?"
if [ -n "$TESTBIN" ]; then
  DUALSCOPE_VK_VALIDATION=1 $TESTBIN --test-threads 1 big_f32 the_f32_kernel_choice the_result_is_the_blocked \
    > "$OUT/vk_gemm.txt" 2>&1
  echo "vk_gemm (big kernel, f32 choice, blocked sum) on the device: exit $? ($(grep 'test result' "$OUT/vk_gemm.txt"))"
fi

echo "== gemm-bench"
SHAPES=(1536x512x8160,ta 8192x1536x512,tb 8192x512x1536 1536x512x8192,ta 8192x256x512,tb 256x512x8192,ta
        8192x1536x256,tb 8192x256x1536 1536x256x8192,ta 8192x512x256,acc 8192x256x256,tb,acc 256x256x8192,ta
        4096x4096x4096)
args=(); for s in "${SHAPES[@]}"; do args+=(--shape "$s"); done
for kern in tiled big; do
  $BIN gemm-bench --path $kern --reps 20 "${args[@]}" --json > "$OUT/gemm-$kern.json" 2> "$OUT/gemm-$kern.err"
  echo "gemm-bench --path $kern: exit $?"
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def load(k):
    try:
        return json.load(open(f"{out}/gemm-{k}.json"))["shapes"]
    except Exception as e:
        print(f"gemm-{k}.json: {e}"); return []
old, new = load("tiled"), load("big")
print(f"{'shape':<24} {'tiled ms':>9} {'TFLOP/s':>8} | {'big ms':>9} {'TFLOP/s':>8} | {'speedup':>7}")
tot = [0.0, 0.0]
for o, n in zip(old, new):
    flags = "".join(f" {f}" for f in ("ta", "tb", "acc") if o.get(f))
    name = f"{o['m']}x{o['n']}x{o['k']}{flags}"
    if o["k"] != 4096: tot[0] += o["median_ms"]; tot[1] += n["median_ms"]
    print(f"{name:<24} {o['median_ms']:9.3f} {o['tflops']:8.2f} | {n['median_ms']:9.3f} {n['tflops']:8.2f} | "
          f"{o['median_ms'] / n['median_ms']:6.2f}x")
print(f"{'sum of the step shapes':<24} {tot[0]:9.3f} {'':8} | {tot[1]:9.3f} {'':8} |"
      + (f" {tot[0] / tot[1]:6.2f}x" if tot[1] else ""))
PY

echo "== bench f32 at bench, DUALSCOPE_GEMM_F32=tiled|big"
for kern in tiled big; do
  DUALSCOPE_GEMM_F32=$kern $BIN bench --engine gpu --config bench --precision f32 --steps 20 --warmup 3 --json \
    > "$OUT/bench-$kern.json" 2> "$OUT/bench-$kern.err"
  echo "bench f32 $kern: exit $?"
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
f = lambda x: "-" if x is None else f"{x:.2f}"
rows = {}
for k in ("tiled", "big"):
    try:
        rows[k] = [e for e in json.load(open(f"{out}/bench-{k}.json"))["engines"] if e["engine"] == "gpu"][0]
    except Exception as e:
        print(f"bench-{k}.json: {e}")
print(f"{'kernel':<6} {'path':<20} {'wall':>7} {'device':>7} {'replay':>7} {'rep_dev':>7} {'gemm ms':>8} first_loss")
for k, g in rows.items():
    gemm = sum(x["ms"] for x in g["kernels_ms"] if x["kernel"].startswith("gemm"))
    print(f"{k:<6} {g.get('gemm_path') or '-':<20} {f(g['median_ms']):>7} {f(g['device_median_ms']):>7} "
          f"{f(g['replay_median_ms']):>7} {f(g['replay_device_median_ms']):>7} {gemm:8.2f} {g['first_loss']:.6f}")
print("(gemm ms: the sum of the gemm dispatches among the step's 25 largest per-kernel medians)")
if len(rows) == 2:
    t = {x["kernel"]: x["ms"] for x in rows["tiled"]["kernels_ms"] if x["kernel"].startswith("gemm")}
    b = {x["kernel"]: x["ms"] for x in rows["big"]["kernels_ms"] if x["kernel"].startswith("gemm")}
    print(f"{'gemm dispatch':<44} {'tiled':>7} {'big':>7}")
    for name in sorted(set(t) | set(b), key=lambda n: -t.get(n, b.get(n, 0))):
        print(f"{name:<44} {f(t.get(name)):>7} {f(b.get(name)):>7}")
PY
