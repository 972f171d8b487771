#!/usr/bin/env bash
# On the H200 host: dualscope's CPU and Vulkan steps (one run, `bench --engine
# both`) against the PyTorch peer on the same checkpoint and batch (CPU on all
# cores, and the GPU eager / CUDA graph).
# Usage: bench/device_torch_peer.sh BIN OUTDIR
set -uo pipefail
BIN=$1; OUT=$2; mkdir -p "$OUT"; W=$(mktemp -d)
for shape in "--config bench" "--config small" "--config bench --batch 1 --seq-len 512"; do
  tag=$(echo "$shape" | tr -d ' -' )
  $BIN bench --engine both $shape --steps 20 --warmup 3 --json --save-batch $W/b.json --save-checkpoint $W/c.st > $W/ds.json
  cat $W/ds.json >> "$OUT/peer_$tag.jsonl"
  L=$(python3 -c "import json; print(json.load(open('$W/ds.json'))['engines'][0]['first_loss'])")
  python3 bench/torch_peer.py --checkpoint $W/c.st --batch $W/b.json --device cpu --steps 10 --warmup 2 --expect-loss $L >> "$OUT/peer_$tag.jsonl"
  for mode in eager graph; do
    python3 bench/torch_peer.py --checkpoint $W/c.st --batch $W/b.json --device cuda --mode $mode --expect-loss $L >> "$OUT/peer_$tag.jsonl"
  done
done
cat "$OUT"/peer_*.jsonl | cut -c1-330
