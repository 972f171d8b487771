#!/usr/bin/env bash
# On the H200 host: the GPU step of two dualscope binaries (before and after a
# change) in one run, interleaved A B A B so that clock and thermal drift fall
# on both, at `bench` in f32 and in the mixed step. Prints one line per run
# and a summary of medians (wall and device, recorded and replayed). Usage:
#   bench/device_ab.sh OLD_BIN NEW_BIN OUTDIR [ROUNDS]
set -uo pipefail
A=$1; B=$2; OUT=$3; ROUNDS=${4:-2}; mkdir -p "$OUT"
for round in $(seq "$ROUNDS"); do
  for prec in f32 mixed; do
    for tag in old new; do
      bin=$A; [ "$tag" = new ] && bin=$B
      "$bin" bench --engine gpu --config bench --precision "$prec" --steps 20 --warmup 3 --json \
        > "$OUT/ab_${tag}_${prec}_$round.json" 2> "$OUT/ab_${tag}_${prec}_$round.err"
    done
  done
done
python3 - "$OUT" <<'PY'
import json, sys, glob, statistics as st
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/ab_*.json")):
    tag, prec = f.rsplit("/", 1)[1].split("_")[1:3]
    try:
        g = [x for x in json.load(open(f))["engines"] if x["engine"] == "gpu"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"{f}: unreadable ({e})"); continue
    rows.setdefault((prec, tag), []).append(g)
    print(f"{prec:5} {tag}: recorded {g['median_ms']:.3f} (device {g['device_median_ms']:.3f}), "
          f"replayed {g['replay_median_ms']:.3f} (device {g['replay_device_median_ms']:.3f}), first loss {g['first_loss']:.7f}")
for prec in ("f32", "mixed"):
    line = []
    for tag in ("old", "new"):
        gs = rows.get((prec, tag), [])
        if gs:
            line.append(f"{tag} recorded {st.median(g['median_ms'] for g in gs):.3f} "
                        f"replayed {st.median(g['replay_median_ms'] for g in gs):.3f} "
                        f"(device {st.median(g['replay_device_median_ms'] for g in gs):.3f})")
    print(f"summary {prec}: " + "; ".join(line))
PY
