#!/usr/bin/env bash
# Old vs new binary on the H200: the same ladders and a short GPU training run
# must give the same results (ladders rung by rung, losses step by step).
# Usage (on the host, from the repository root, binaries in .device/old and
# .device/new): bench/device_same.sh
set -u
OUT=/tmp; mkdir -p $OUT/c
D=$OUT/c/data.txt; cat docs/*.md docs/measurements/*/*.txt README.md MODEL.md 2>/dev/null > $D; ls -la $D
for tag in old new; do
  B=.device/$tag/dualscope
  $B ladder --config bench --precision f16 --json > $OUT/c/ladder_bench_f16_$tag.json 2> $OUT/c/ladder_bench_f16_$tag.err; echo "$tag ladder bench f16 rc $?"
  $B ladder --config small --json > $OUT/c/ladder_small_f32_$tag.json 2> $OUT/c/ladder_small_f32_$tag.err; echo "$tag ladder small f32 rc $?"
  $B ladder --config bench --precision f16 --mode chained --len 512 --json > $OUT/c/ladder_b1_f16_$tag.json 2> $OUT/c/ladder_b1_f16_$tag.err; echo "$tag ladder bench len512 chained f16 rc $?"
  $B train --engine gpu --config bench --precision f16 --steps 30 --log-every 10 --data $D --json > $OUT/c/train_f16_$tag.json 2> $OUT/c/train_f16_$tag.err; echo "$tag train f16 rc $?"
  $B train --engine gpu --config bench --steps 20 --json --data $D > $OUT/c/train_f32_$tag.json 2> $OUT/c/train_f32_$tag.err; echo "$tag train f32 rc $?"
done
python3 - $OUT/c <<'PY'
import json, sys
d = sys.argv[1]
def load(n):
    try: return json.load(open(f"{d}/{n}"))
    except Exception as e: return {"error": str(e)}
for name in ["ladder_bench_f16", "ladder_small_f32", "ladder_b1_f16"]:
    o, n = load(f"{name}_old.json"), load(f"{name}_new.json")
    ro = {r["id"]: (r["status"], r["rel_l2"]) for r in o.get("rungs", [])}
    rn = {r["id"]: (r["status"], r["rel_l2"]) for r in n.get("rungs", [])}
    same = ro == rn and o.get("status") == n.get("status")
    e2e = lambda x: (x.get("end_to_end") or {}).get("loss_gpu")
    print(f"{name}: old {o.get('status')} new {n.get('status')}; rungs identical: {same}; e2e loss gpu {e2e(o)} / {e2e(n)}; validation {o.get('validation')} / {n.get('validation')}")
    if not same:
        for k in ro:
            if ro.get(k) != rn.get(k): print("   ", k, ro.get(k), rn.get(k))
for name in ["train_f16", "train_f32"]:
    o, n = load(f"{name}_old.json"), load(f"{name}_new.json")
    lo = [e["loss"] for e in o.get("log", [])]; ln = [e["loss"] for e in n.get("log", [])]
    print(f"{name}: steps {len(lo)}/{len(ln)}, losses identical: {lo == ln}, last {lo[-1:]} / {ln[-1:]}, skipped {o.get('skipped')} / {n.get('skipped')}")
PY
