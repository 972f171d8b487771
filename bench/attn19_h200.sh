#!/bin/bash
# On the device host: the attention kernels in blocks of 16 (DUALSCOPE_ATTN=narrow)
# against the wide ones in blocks of 64 (DUALSCOPE_ATTN=wide), docs/speed.md
# "attn19". For each shape and precision, `bench --engine gpu --json` with each
# kernel set: the recorded and replayed step's wall and device medians and the
# three attention kernels' per-kernel medians (`kernels_ms`); then the ladder
# at `bench` (f32 and mixed) and at B=1 T=512 (mixed, chained) with the wide
# kernels forced, and its verdicts, and `ladder --carry-check` (a carried
# prefix of keys) with them. Prints one table; each run's output is in
# OUT/. Under 4 minutes on the H200.
# Usage: bench/attn19_h200.sh BIN OUT
#   ATTN19_FULL=1 also times f32 at `small` and B=1 T=512, and B=64 T=256.
set -uo pipefail
BIN=$1; OUT=$2
mkdir -p "$OUT"
shapes=("bench|--config bench|f32" "bench|--config bench|mixed" "small|--config small|mixed"
  "b1t512|--config bench --batch 1 --seq-len 512|mixed" "b1t4096|--config bench --batch 1 --seq-len 4096|mixed")
if [ "${ATTN19_FULL:-0}" = 1 ]; then
  shapes+=("small|--config small|f32" "b1t512|--config bench --batch 1 --seq-len 512|f32"
    "b64t256|--config bench --batch 64 --seq-len 256|mixed")
fi
summary() { # one line from a bench --json: medians and the attention kernels' ms
  python3 - "$1" <<'PY'
import json, sys
f = lambda x: "-" if x is None else f"{x:.3f}"
try:
    g = json.load(open(sys.argv[1]))["engines"][0]
    k = {e["kernel"]: e["ms"] for e in g.get("kernels_ms", [])}
    cols = [g.get(n) for n in ["median_ms", "device_median_ms", "replay_median_ms", "replay_device_median_ms"]]
    cols += [k.get(n) for n in ["attn_fwd", "attn_bwd_q", "attn_bwd_kv"]]
    print(" ".join(f(x) for x in cols))
except Exception:
    print("- - - - - - -")
PY
}
rows=()
for s in "${shapes[@]}"; do
  IFS='|' read -r name args prec <<< "$s"
  for a in narrow wide; do
    tag=$name-$prec-$a
    # shellcheck disable=SC2086
    DUALSCOPE_ATTN=$a timeout 60 $BIN bench --engine gpu $args --precision $prec --json \
      > "$OUT/bench-$tag.json" 2> "$OUT/bench-$tag.err"
    echo "bench $tag: exit $?"
    rows+=("$name $prec $a $(summary "$OUT/bench-$tag.json")")
  done
done
verdicts=()
for l in "bench|--config bench|f32" "bench|--config bench|f16" "b1t512|--config bench --mode chained --len 512|f16"; do
  IFS='|' read -r name args prec <<< "$l"
  tag=$name-$prec
  # shellcheck disable=SC2086
  DUALSCOPE_ATTN=wide timeout 90 $BIN ladder $args --precision $prec --json > "$OUT/ladder-$tag.json" 2> "$OUT/ladder-$tag.err"
  rc=$?
  echo "ladder $tag (wide): exit $rc"
  verdicts+=("$(python3 - "$OUT/ladder-$tag.json" "$tag" "$rc" <<'PY'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
    rungs = {r["id"]: r["status"] for r in v.get("rungs", [])}
    att = ", ".join(f"{k} {rungs.get(k, '-')}" for k in ["attn_fwd", "attn_bwd"])
    e2e = (v.get("end_to_end") or {}).get("status", "-")
    val = v.get("validation") or {}
    ran = " ".join(k for k in val.get("kernels", []) if k.startswith("attn"))
    print(f"ladder {sys.argv[2]} (wide, exit {sys.argv[3]}): {v.get('status')}; {att}; end_to_end {e2e}; "
          f"validation on {val.get('on', '-')} errors {val.get('errors', '-')}; ran {ran or '-'}")
except Exception as e:
    print(f"ladder {sys.argv[2]} (wide, exit {sys.argv[3]}): no JSON ({e})")
PY
)")
done
# The carried prefix (docs/carry-state.md: keys before the row) on the wide kernels.
DATA=$OUT/text.txt
cat README.md docs/*.md src/*/*.rs > "$DATA" 2>/dev/null
DUALSCOPE_ATTN=wide timeout 90 $BIN ladder --config bench --data "$DATA" --carry-check 3 --len 100 --json \
  > "$OUT/carry-check-wide.json" 2> "$OUT/carry-check-wide.err"
rc=$?
verdicts+=("carry-check bench (wide, exit $rc): passed $(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('passed'))" "$OUT/carry-check-wide.json" 2>/dev/null || echo '-')")
echo
echo "ms (medians): recorded wall/device, replayed wall/device, per-kernel attn_fwd attn_bwd_q attn_bwd_kv"
printf '%-8s %-5s %-4s %8s %8s %8s %8s | %8s %8s %8s\n' shape prec attn wall dev rep rep_dev fwd bwd_q bwd_kv
for r in "${rows[@]}"; do
  # shellcheck disable=SC2086
  printf '%-8s %-5s %-4s %8s %8s %8s %8s | %8s %8s %8s\n' $r
done
echo "(auto, the default, takes wide where W >= 64 and ceil(T/64)*B*NH >= 256: bench, b1t4096, b64t256)"
printf '%s\n' "${verdicts[@]}"
