#!/bin/bash
# Determinism (ladder --repeat), the PyTorch interop check and a validated
# mixed-precision training run on the device host. Usage: bench/h200_round2.sh BINARY OUTDIR
set -u
bin=$1; out=$2; mkdir -p $out/det
for args in "f32:" "f32-chained:--mode chained" "f16:--precision f16" "f16-chained:--precision f16 --mode chained" "bf16:--precision bf16" "f16-cm64:--precision f16 --gemm-path coopmat64" "bench-f16:--config bench --precision f16"; do
  name=${args%%:*}; extra=${args#*:}
  cfg=small; case $extra in *"--config"*) cfg="";; esac
  $bin ladder ${cfg:+--config $cfg} --repeat 5 $extra --json > $out/det/$name.json 2> $out/det/$name.err
  echo "$name rc=$? $(python3 -c "import json,sys; d=json.load(open('$out/det/$name.json')); r=d['repeat']; print(d.get('gemm_path'), {k: r[k] for k in r if k in ('bit_identical','gpu_differing','cpu_differing','end_to_end_identical')})" 2>&1 | tail -1)"
done
