#!/bin/bash
# On the device host: the ladder on real text at B=1, T=4096 (one row of
# DATA from OFFSET) at the bench width, in both modes, with the mixed step's
# default precision map and with every stage that has an f16 kernel in f16;
# then a precision bisect on the same row (isolated). Prints each run's
# summary: the map, the rungs' statuses, the first failing rung and tensor;
# for the bisect every probe and the map it found. Reports: OUT/NAME.json.
# Usage: bench/precision_h200.sh BIN DATA OUT [OFFSET] [CONFIG] [LEN]
#   (defaults: OFFSET 0, CONFIG bench, LEN 4096; BISECT_CONFIG=small to run the bisect narrower)
set -uo pipefail
BIN=$1; DATA=$2; OUT=$3; OFFSET=${4:-0}; CONFIG=${5:-bench}; LEN=${6:-4096}
BISECT_CONFIG=${BISECT_CONFIG:-$CONFIG}
mkdir -p "$OUT"
row="--data $DATA --offset $OFFSET --len $LEN"
summary() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"  precision map: {r.get('precision_map')}")
for x in r["rungs"]:
    bad = [c for c in x["cases"] if c["status"] != "pass"]
    worst = max(x["cases"], key=lambda c: float(c["rel_l2"]) / max(float(c["tolerance"]), 1e-30))
    print(f"  {x['id']:<10} {x['status']:<5} worst {worst['name']}: {float(worst['rel_l2']):.2e} of {float(worst['tolerance']):.1e}"
          + (f"  ({len(bad)} not pass: {bad[0]['name']}: {bad[0]['notes'][:1]})" if bad else ""))
e = r.get("end_to_end")
if e:
    print(f"  end_to_end {e['status']}: loss rel {float(e['loss_rel_err']):.2e} (gate {float(e['loss_tolerance']):.1e}), norm rel {float(e['grad_norm_rel_diff']):.2e}")
print(f"  status {r['status']}")
PY
}
for mode in isolated chained; do
  for name in default all-f16; do
    case $name in
      default) extra="--precision f16" ;;
      all-f16) extra="--precision f16 --precision-map all=f16,embed.bwd=f32" ;;
    esac
    t0=$(date +%s)
    $BIN ladder --config "$CONFIG" $row --mode $mode $extra --json > "$OUT/ladder-$name-$mode.json" 2> "$OUT/ladder-$name-$mode.err"
    rc=$?
    echo "ladder $CONFIG T=$LEN $mode, $name map: exit $rc, $(( $(date +%s) - t0 )) s"
    summary "$OUT/ladder-$name-$mode.json" || tail -3 "$OUT/ladder-$name-$mode.err"
  done
done
t0=$(date +%s)
$BIN precision-bisect --config "$BISECT_CONFIG" $row --json > "$OUT/precision-bisect.json" 2> "$OUT/precision-bisect.err"
rc=$?
echo "precision-bisect $BISECT_CONFIG T=$LEN: exit $rc, $(( $(date +%s) - t0 )) s"
python3 - "$OUT/precision-bisect.json" <<'PY' || tail -5 "$OUT/precision-bisect.err"
import json, sys
r = json.load(open(sys.argv[1]))["report"]
print(f"  candidates: {', '.join(r['candidates'])}")
for i, p in enumerate(r["probes"], 1):
    f32s = ", ".join(p["f32_stages"]) or "none"
    at = f" -> {p['rung']}: {p['tensor']}" if p["rung"] else ""
    print(f"  {i:>2} {p['phase']:<9} {'pass' if p['pass'] else 'FAIL'} {p['ms'] / 1e3:7.1f} s  f32: {f32s}{at}")
print(f"  outcome {r['outcome']}; keep f32: {', '.join(r['keep_f32']) or 'nothing'}")
print(f"  map: {r['map']}")
PY
