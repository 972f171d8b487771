#!/usr/bin/env bash
# Run on the lent H200 host (see docs/cpu-reference.md): checks the CPU reference
# against bench/torch_reference.py on random checkpoints and real rows, and
# benchmarks the CPU step on all cores. Usage: bench/device_cpu_check.sh BIN OUTDIR
set -uo pipefail
BIN=$1; OUT=$2; mkdir -p "$OUT"; W=$(mktemp -d)
nproc > "$OUT/host.txt"; lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200 >> "$OUT/host.txt"
# Real rows of different lengths: prose, code, and binary bytes.
head -c 700 README.md > $W/prose; head -c 333 src/cpu/forward.rs > $W/code
head -c 129 "$BIN" | tail -c 97 > $W/binary; printf 'ab' > $W/two
i=0
for cfg in small bench; do
  for seed in 1 2; do
    i=$((i+1))
    $BIN init --config $cfg --seed $seed --out $W/c$i.st >/dev/null
    $BIN grads --checkpoint $W/c$i.st --data $W/prose --data $W/code --data $W/binary --data $W/two --out $W/g$i.st --json > $W/d$i.json
    python3 bench/torch_reference.py grads $W/c$i.st $W/g$i.st $W/prose $W/code $W/binary $W/two \
      | python3 -c "import json,sys; r=json.load(sys.stdin); r['config']='$cfg'; r['seed']=$seed; r['precision']='f32'; print(json.dumps(r))" >> "$OUT/grads_check.jsonl"
    $BIN grads --precision f64 --checkpoint $W/c$i.st --data $W/prose --data $W/code --data $W/binary --data $W/two --out $W/h$i.st --json > /dev/null
    python3 bench/torch_reference.py grads $W/c$i.st $W/h$i.st $W/prose $W/code $W/binary $W/two \
      | python3 -c "import json,sys; r=json.load(sys.stdin); r['config']='$cfg'; r['seed']=$seed; r['precision']='f64'; print(json.dumps(r))" >> "$OUT/grads_check.jsonl"
    $BIN step --checkpoint $W/c$i.st --data $W/prose --data $W/code --out $W/s$i.st --json > $W/st$i.json
    $BIN grads --checkpoint $W/c$i.st --data $W/prose --data $W/code --out $W/sg$i.st --json > /dev/null
    python3 bench/torch_reference.py step $W/c$i.st $W/s$i.st $W/sg$i.st $W/prose $W/code \
      | python3 -c "import json,sys; r=json.load(sys.stdin); r['config']='$cfg'; r['seed']=$seed; print(json.dumps(r))" >> "$OUT/step_check.jsonl"
  done
done
for cfg in small bench; do
  $BIN bench --engine cpu --config $cfg --steps 20 --warmup 3 --json >> "$OUT/bench_cpu.jsonl"
done
$BIN bench --engine cpu --config bench --batch 1 --seq-len 512 --steps 20 --warmup 3 --json >> "$OUT/bench_cpu.jsonl"
cat "$OUT"/*.jsonl | cut -c1-400
