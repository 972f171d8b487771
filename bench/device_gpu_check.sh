#!/usr/bin/env bash
# Run on the lent H200 host: the Vulkan engine's gradients against the CPU
# engine and against the independent PyTorch f64 model (bench/torch_reference.py),
# a GPU training step against PyTorch's AdamW, and 1000 training steps on mixed
# real text on both engines. Usage: bench/device_gpu_check.sh BIN OUTDIR
set -uo pipefail
BIN=$1; OUT=$2; mkdir -p "$OUT"; W=$(mktemp -d)
head -c 700 README.md > $W/prose; head -c 333 src/cpu/forward.rs > $W/code
head -c 129 "$BIN" | tail -c 97 > $W/binary; printf 'ab' > $W/two
ROWS="$W/prose $W/code $W/binary $W/two"
DATA=""; for r in $ROWS; do DATA="$DATA --data $r"; done
i=0
for cfg in small bench; do
  for seed in 1 2; do
    i=$((i+1))
    $BIN init --config $cfg --seed $seed --out $W/c$i.st >/dev/null
    $BIN grads --engine gpu --checkpoint $W/c$i.st $DATA --out $W/g$i.st --json > $W/dg$i.json
    $BIN grads --engine cpu --checkpoint $W/c$i.st $DATA --out $W/h$i.st --json > $W/dc$i.json
    python3 bench/torch_reference.py grads $W/c$i.st $W/g$i.st $ROWS \
      | python3 -c "import json,sys; r=json.load(sys.stdin); r['config']='$cfg'; r['seed']=$seed; r['engine']='gpu'; print(json.dumps(r))" >> "$OUT/grads_vs_torch.jsonl"
    python3 - $W/g$i.st $W/h$i.st $cfg $seed >> "$OUT/grads_gpu_vs_cpu.jsonl" <<'PY'
import json, sys
sys.path.insert(0, "bench")
from torch_reference import read_safetensors, rel_l2
g, _ = read_safetensors(sys.argv[1]); c, _ = read_safetensors(sys.argv[2])
per = {k: rel_l2(g[k].double(), c[k].double()) for k in c}
print(json.dumps({"config": sys.argv[3], "seed": int(sys.argv[4]), "worst_rel_l2": max(per.values()),
                  "worst_tensor": max(per, key=per.get), "per_tensor": per}))
PY
    $BIN step --engine gpu --checkpoint $W/c$i.st --data $W/prose --data $W/code --out $W/s$i.st --json > $W/st$i.json
    $BIN grads --engine gpu --checkpoint $W/c$i.st --data $W/prose --data $W/code --out $W/sg$i.st --json > /dev/null
    python3 bench/torch_reference.py step $W/c$i.st $W/s$i.st $W/sg$i.st $W/prose $W/code \
      | python3 -c "import json,sys; r=json.load(sys.stdin); r['config']='$cfg'; r['seed']=$seed; r['engine']='gpu'; print(json.dumps(r))" >> "$OUT/step_vs_torch.jsonl"
  done
done
# 1000 steps on mixed real text (prose, code, binary bytes), both engines.
cat README.md docs/*.md src/cpu/*.rs src/vk/*.rs > $W/mixed; head -c 20000 "$BIN" >> $W/mixed; ls -l $W/mixed > "$OUT/train_data.txt"
for engine in gpu cpu; do
  /usr/bin/time -f "%e s wall" $BIN train --engine $engine --data $W/mixed --config small --steps 1000 --log-every 100 --seed 3 \
    --json > "$OUT/train_$engine.json" 2> "$OUT/train_$engine.err"
  echo "train $engine exit $?" >> "$OUT/train_exit.txt"
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
g = json.load(open(f"{out}/train_gpu.json")); c = json.load(open(f"{out}/train_cpu.json"))
gl = [s["loss"] for s in g["log"]]; cl = [s["loss"] for s in c["log"]]
diff = max(abs(a - b) for a, b in zip(gl, cl))
print(json.dumps({"steps": len(gl), "gpu_first10": g["mean_loss_first10"], "gpu_last10": g["mean_loss_last10"],
                  "cpu_first10": c["mean_loss_first10"], "cpu_last10": c["mean_loss_last10"],
                  "gpu_skipped": g["skipped"], "cpu_skipped": c["skipped"], "max_abs_loss_diff_per_step": diff,
                  "gpu_ms_median": sorted(s["ms"] for s in g["log"])[len(gl)//2],
                  "cpu_ms_median": sorted(s["ms"] for s in c["log"])[len(cl)//2]}), file=open(f"{out}/train_compare.json", "w"))
PY
cat "$OUT"/grads_gpu_vs_cpu.jsonl | cut -c1-200; cat "$OUT"/grads_vs_torch.jsonl "$OUT"/step_vs_torch.jsonl | cut -c1-300
cat "$OUT"/train_exit.txt "$OUT"/train_compare.json; tail -2 "$OUT"/train_*.err
