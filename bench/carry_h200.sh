#!/bin/bash
# On the device host: `train --carry-state` against random windows from zero
# on a real text file, on the GPU engine in f32 and in the mixed step (f16),
# at `small`, B = 8, T = 128 (stretches of 8 windows) and T = 32 (of 16),
# 400 steps each, the same seed (docs/carry-state.md); then `ladder --carry-check`
# at small and at bench width. Prints each run's final loss, the mean of its
# last 50 losses and its wall time; the reports are OUT/NAME.json.
# Usage: bench/carry_h200.sh BIN DATA OUT [STEPS]
set -uo pipefail
BIN=$1; DATA=$2; OUT=$3; STEPS=${4:-400}
mkdir -p "$OUT"
for prec in f32 f16; do
for run in carry-128:8 zero-128:0 carry-32:16 zero-32:0; do
  name=$prec-${run%%:*}; k=${run##*:}; t=${name##*-}
  extra=""
  [ "$k" != 0 ] && extra="--carry-state --carry-windows $k"
  t0=$(date +%s.%N)
  $BIN train --data "$DATA" --config small --batch 8 --seq-len "$t" --steps "$STEPS" --seed 1 --json $extra \
    --engine gpu --precision "$prec" \
    > "$OUT/$name.json" 2> "$OUT/$name.err"
  rc=$?
  t1=$(date +%s.%N)
  echo "$name: exit $rc, $(python3 -c "print(f'{$t1 - $t0:.0f} s')")"
  python3 - "$OUT/$name.json" <<'PY' || tail -3 "$OUT/$name.err"
import json, sys
r = json.load(open(sys.argv[1]))
l = [e["loss"] for e in r["log"]]
tail = l[-50:]
print(f"  {len(l)} steps: first {l[0]:.4f}, final {l[-1]:.4f}, mean of the last {len(tail)} {sum(tail) / len(tail):.4f}, skipped {r['skipped']}")
PY
done
done
for cfg in small bench; do
  $BIN ladder --config "$cfg" --data "$DATA" --carry-check 3 --len 100 --json > "$OUT/carry_check_$cfg.json" 2> "$OUT/carry_check_$cfg.err"
  echo "carry check at $cfg: exit $?"
  python3 - "$OUT/carry_check_$cfg.json" <<'PY' || tail -3 "$OUT/carry_check_$cfg.err"
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["per_chunk"]:
    z = c["from_zero_head"]["rel_l2"] if c["from_zero_head"] else None
    print(f"  chunk {c['chunk']}: logits {c['logits']['rel_l2']:.2e}, loss {c['token_loss']['rel_l2']:.2e}, from zero {z}")
g = max(r["last_chunk_grads"], key=lambda g: g["cmp"]["rel_l2"])
print(f"  last chunk's worst gradient {g['tensor']} {g['cmp']['rel_l2']:.2e}; passed {r['passed']}; not run: {r['not_run']}")
if r["gpu"]:
    for c in r["gpu"]["per_chunk"]:
        print(f"  gpu chunk {c['chunk']}: logits {c['logits']['rel_l2']:.2e}, loss {c['loss_rel']:.2e}")
    g = max(r["gpu"]["last_chunk_grads"], key=lambda g: g["cmp"]["rel_l2"])
    print(f"  gpu last chunk's worst gradient {g['tensor']} {g['cmp']['rel_l2']:.2e}")
PY
done
