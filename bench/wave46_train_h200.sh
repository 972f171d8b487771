#!/bin/bash
# On the device host: version 46's FMA wavefronts on the paths users run, under
# validation layer 1.4.309 (.device/vvl14.deb): the standard ladders and
# 50-step training runs (bench/validate_h200.sh ladders train), then at bench
# width with one row of 512 positions, where the FMA wavefronts are the
# default: `train` (f16, controller on) and `bench --controller`, validation on,
# and the same bench without validation for its time; last, the backward
# wavefront's probe at `bench`. Usage:
#   bench/wave46_train_h200.sh BIN OUT
set -u
BIN=$1; OUT=$2
mkdir -p "$OUT"
bash bench/validate_h200.sh "$BIN" core "$OUT/validate" ladders train > /dev/null
cat "$OUT/validate/summary.txt"
cfg="$OUT/b1t512.json"
printf '{"vocab":256,"d_embed":256,"hidden":512,"layers":2,"attn_dim":256,"heads":4,"window":128,"batch":1,"seq_len":512}\n' > "$cfg"
text=/tmp/wave46-text.txt
cat README.md docs/*.md docs/*/*.md src/*/*.rs > $text 2>/dev/null
export VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu
DUALSCOPE_VK_VALIDATION=core $BIN train --config "$cfg" --engine gpu --precision f16 --data $text --steps 40 --out /tmp/wave46-run \
  > "$OUT/train-b1t512.out" 2> "$OUT/train-b1t512.err"
echo "train B=1 T=512 f16 (validation core): rc=$? $(grep -h '^dualscope: validation' "$OUT/train-b1t512.err" | tail -1)"
tail -3 "$OUT/train-b1t512.out"
DUALSCOPE_VK_VALIDATION=core $BIN bench --engine gpu --config "$cfg" --precision mixed --controller --steps 5 --warmup 1 --json \
  > "$OUT/bench-controller-val.json" 2> "$OUT/bench-controller-val.err"
echo "bench --controller B=1 T=512 (validation core): rc=$? $(grep -h '^dualscope: validation' "$OUT/bench-controller-val.err" | tail -1)"
unset VK_LAYER_PATH LD_LIBRARY_PATH
$BIN bench --engine gpu --config "$cfg" --precision mixed --controller --steps 20 --warmup 3 --json > "$OUT/bench-controller.json" 2> "$OUT/bench-controller.err"
python3 - "$OUT/bench-controller.json" <<'PY'
import json, sys
g = [e for e in json.load(open(sys.argv[1]))["engines"] if e["engine"] == "gpu"][0]
print(f"bench --controller B=1 T=512 mixed: replayed {g['replay_median_ms']:.3f} (device {g['replay_device_median_ms']:.3f}), "
      f"controller's path {g['controller_median_ms']:.3f} (device {g['controller_device_median_ms']:.3f}); waves {g['recurrence']['wave_loads']}")
PY
# The backward wavefront's probe at `bench` (B = 32), with every chunk summed.
DUALSCOPE_GRID_PROBE=1 $BIN bench --engine gpu --config bench --precision mixed --steps 5 --warmup 2 --json > "$OUT/probe-bench.json" 2> "$OUT/probe-bench.err"
python3 - "$OUT/probe-bench.json" <<'PY'
import json, sys
g = [e for e in json.load(open(sys.argv[1]))["engines"] if e["engine"] == "gpu"][0]
for k, us in sorted((g["recurrence"].get("bwd_wave_probe") or {}).items()):
    print(f"  bench bwd_wave_probe {k:28s} {us:7.2f} us")
PY
