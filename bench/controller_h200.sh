#!/bin/bash
# On the device host: train's default step (the controller on) against the bare
# and the replayed step at the `bench` width, B=16 T=1024, in f16 (mixed) and
# f32. For each precision: `bench --controller` (bare, replayed and the
# controller's path: compute, judge, apply; wall and device medians), and
# `train --engine gpu --config bench --batch 16 --seq-len 1024 --steps 40` with
# the controller (the default split step), with DUALSCOPE_HOST_NORMS=1 (the old
# path: every gradient read back), and with --no-controller (median ms/step of
# the log, the first 5 steps left out). Prints one table; each run's output is
# in OUT/. Under 4 minutes on the H200.
# Usage: bench/controller_h200.sh BIN OUT [DATA]
#   DATA: the text to train on (default: this repository's docs and sources
#   concatenated; `train` takes a file, the embedded corpus has none).
set -uo pipefail
BIN=$1; OUT=$2; DATA=${3:-}
mkdir -p "$OUT"
# The runs' checkpoints and the default text go here, not under OUT: they are
# megabytes each, and only the reports need to come back.
WORK=$(mktemp -d)
if [ -z "$DATA" ]; then
  DATA=$WORK/text.txt
  cat README.md docs/*.md src/*/*.rs > "$DATA" 2>/dev/null
fi
SHAPE=${CONTROLLER_SHAPE:---config bench --batch 16 --seq-len 1024}
median_log() { # the median ms of a train --json log, steps after the 5th
  python3 - "$1" <<'PY'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
    ms = sorted(e["ms"] for e in v["log"][5:] if isinstance(e.get("ms"), (int, float)))
    print(f"{ms[len(ms) // 2]:.2f}" if ms else "-")
except Exception as e:
    print("-")
PY
}
rows=()
for p in mixed f32; do
  # shellcheck disable=SC2086
  $BIN bench --engine gpu $SHAPE --precision $p --steps 30 --warmup 5 --controller --json \
    > "$OUT/bench-$p.json" 2> "$OUT/bench-$p.err"
  echo "bench $p: exit $?"
  b=$(python3 - "$OUT/bench-$p.json" <<'PY'
import json, sys
f = lambda x: "-" if x is None else f"{x:.2f}"
try:
    g = json.load(open(sys.argv[1]))["engines"][0]
    print(" ".join(f(g.get(k)) for k in ["median_ms", "device_median_ms", "replay_median_ms",
          "replay_device_median_ms", "controller_median_ms", "controller_device_median_ms"]))
except Exception:
    print("- - - - - -")
PY
)
  for mode in split host none; do
    case $mode in
      split) env=(); extra="" ;;
      host) env=(DUALSCOPE_HOST_NORMS=1); extra="" ;;
      none) env=(); extra="--no-controller" ;;
    esac
    # shellcheck disable=SC2086
    env "${env[@]}" $BIN train --engine gpu $SHAPE --precision ${p/mixed/f16} --data "$DATA" --steps 40 \
      --out "$WORK/train-$p-$mode" $extra --json > "$OUT/train-$p-$mode.json" 2> "$OUT/train-$p-$mode.err"
    echo "train $p $mode: exit $?"
  done
  rows+=("$p $b $(median_log "$OUT/train-$p-split.json") $(median_log "$OUT/train-$p-host.json") $(median_log "$OUT/train-$p-none.json")")
done
echo
echo "$SHAPE; ms per step (medians)"
printf '%-6s %9s %9s %9s %9s %9s %9s | %11s %11s %11s\n' prec bare bare_dev replay rep_dev ctl ctl_dev \
  train_split train_host train_noctl
for r in "${rows[@]}"; do
  # shellcheck disable=SC2086
  printf '%-6s %9s %9s %9s %9s %9s %9s | %11s %11s %11s\n' $r
done
echo "(ctl: bench's controller path, compute + judge + apply; train_*: the log's ms/step:"
echo " split = the default, host = DUALSCOPE_HOST_NORMS=1, noctl = --no-controller)"
