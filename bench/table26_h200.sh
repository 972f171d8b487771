#!/bin/bash
# On the device host, one call: issue 19's one-run table (bench/device_speed.sh,
# five shapes, PyTorch's CUDA graphs) and the floors of the shapes whose 2x
# target is missed (bench/floor64_h200.sh; at `bench` and `small` with the
# wavefronts' operand loads alone, session 26), on one card. About 8 minutes.
# Usage: bench/table26_h200.sh BIN OUT
set -uo pipefail
BIN=$1; OUT=$2
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/card.txt"
TORCH_MODES=graph TORCH_CPU=0 timeout 430 bench/device_speed.sh "$BIN" "$OUT/table" > "$OUT/table.log" 2>&1
echo "device_speed: exit $?"
timeout 110 bench/floor64_h200.sh "$BIN" "$OUT/floor" > /dev/null 2>&1
echo "floor64: exit $?"
