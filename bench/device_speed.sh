#!/usr/bin/env bash
# On the H200 host (through the device tool), one run: dualscope's CPU and
# Vulkan steps (`bench --engine both`: wall and device medians of the step
# recorded each time and of the step recorded once and replayed, both timed
# as a whole (one timestamp pair, as CUDA events around a graph), and a run
# timed per kernel for the breakdown; the recurrence's floor), then the PyTorch peer on the same checkpoint and batch:
# CPU on all cores, GPU eager, CUDA graph, torch.compile (bench shape only),
# in plain float32, with TF32 (cuDNN's default) and with automatic mixed
# precision (f16 autocast + GradScaler); and dualscope's mixed-precision step
# (f16 products on cooperative matrices, dynamic loss scale). Usage:
#   bench/device_speed.sh BIN OUTDIR
# SHAPES (';'-separated) picks the shapes; the default is issue 19's five.
# TORCH_MODES (default "eager graph") and TORCH_CPU=0 trim the peer's runs
# (the best mode at every shape so far is a CUDA graph).
set -uo pipefail
BIN=$1; OUT=$2; mkdir -p "$OUT"; W=$(mktemp -d)
SHAPES=${SHAPES:-"--config bench;--config small;--config bench --batch 1 --seq-len 512;--config bench --batch 1 --seq-len 4096;--config bench --batch 64 --seq-len 256"}
IFS=';' read -ra shapes <<< "$SHAPES"
for shape in "${shapes[@]}"; do
  tag=$(echo "$shape" | tr -d ' -' )
  F="$OUT/speed_$tag.jsonl"
  $BIN bench --engine both $shape --steps 20 --warmup 3 --json --save-batch $W/b.json --save-checkpoint $W/c.st > $W/ds.json
  cat $W/ds.json >> "$F"
  L=$(python3 -c "import json; print(json.load(open('$W/ds.json'))['engines'][0]['first_loss'])")
  P="python3 bench/torch_peer.py --checkpoint $W/c.st --batch $W/b.json --expect-loss $L"
  [ "${TORCH_CPU:-1}" = 1 ] && $P --device cpu --steps 10 --warmup 2 >> "$F"
  tm=${TORCH_MODES:-"eager graph"}
  modes=$tm; [ "$tag" = configbench ] && [ -z "${TORCH_MODES:-}" ] && modes="eager graph compile"
  for mode in $modes; do $P --device cuda --mode $mode >> "$F"; done
  for mode in $tm; do $P --device cuda --mode $mode --tf32 >> "$F"; done
  for mode in $tm; do $P --device cuda --mode $mode --amp f16 >> "$F" 2> "$OUT/amp_${mode}_$tag.err"; done
  $BIN bench --engine gpu $shape --precision mixed --steps 20 --warmup 3 --json > "$OUT/mixed_$tag.json"
done
python3 - "$OUT" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/speed_*.jsonl")):
    rows = [json.loads(l) for l in open(f) if l.strip()]
    ds = rows[0]; e = {x["engine"]: x for x in ds["engines"]}
    print(f"{ds['config']} B={ds['batch']} T={ds['seq_len']}: cpu {e['cpu']['median_ms']:.1f} ms, "
          f"gpu {e['gpu']['median_ms']:.2f} (device {e['gpu']['device_median_ms']:.2f}), "
          f"replayed {e['gpu']['replay_median_ms']:.2f} (device {e['gpu']['replay_device_median_ms']:.2f}); "
          f"speedup {ds['speedup']:.1f}x, replayed {ds['speedup_replay']:.1f}x; "
          f"timed per kernel {e['gpu']['instrumented_median_ms']:.2f} (device sum {e['gpu']['instrumented_device_median_ms']:.2f}); "
          f"recurrence {e['gpu']['recurrence']}")
    for r in rows[1:]:
        flags = (" tf32" if r["tf32"] else "") + (f" amp {r['amp']}" if r.get("amp") else "")
        wall = f", wall {r['wall_median_ms']:.2f}" if "wall_median_ms" in r else ""
        print(f"   torch {r['device']} {r['mode']}{flags}: {r['median_ms']:.2f} ms{wall} "
              f"(loss rel diff {r.get('loss_rel_diff', float('nan')):.1e})")
    try:
        m = json.load(open(f.replace("/speed_", "/mixed_").replace(".jsonl", ".json")))
        g = [x for x in m["engines"] if x["engine"] == "gpu"][0]
        print(f"   dualscope mixed: gpu {g['median_ms']:.2f} (device {g['device_median_ms']:.2f}), "
              f"replayed {g['replay_median_ms']:.2f} (device {g['replay_device_median_ms']:.2f}); "
              f"timed per kernel {g['instrumented_median_ms']:.2f} (device sum {g['instrumented_device_median_ms']:.2f}); "
              f"first loss {g['first_loss']:.6f}; recurrence {g['recurrence']}")
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"   dualscope mixed: missing ({e})")
PY
