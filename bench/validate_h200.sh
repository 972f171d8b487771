#!/bin/bash
# Runs the ladders and a training run under the Khronos validation layer on the
# device host. Usage: bench/validate_h200.sh BINARY MODE OUTDIR [what...]
#   MODE: core | sync | gpu (DUALSCOPE_VK_VALIDATION); what: ladders, shapes, long, train, controller, triage, pmap (default all)
#   shapes: the f32 and f16 ladders at issue 19's other shapes, B=1 T=512 (one row, --len) and B=64 T=256
#   (bench/configs/bench_b64.json) at bench width
#   train: the default step with the controller on (the split step and its device norms, grad_norms.comp)
#   controller: bench --controller (the split step replayed) and the old host-norms path for contrast
#   pmap: the precision map's paths (all-f16, mixed maps, one f16 recurrence) in both ladder modes, train and precision-bisect
#   triage: a small f16 run with planted events and captures, replay of each capture, drift and scan
# Needs .device/vvl14.deb (Debian 13's vulkan-validationlayers 1.4.309, see ../shared/GPU.md).
set -u
bin=$1; mode=$2; out=$3; shift 3
what=${*:-ladders shapes long train controller triage pmap}
mkdir -p /tmp/v14 "$out" && dpkg -x .device/vvl14.deb /tmp/v14
export VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d
export LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu
export DUALSCOPE_VK_VALIDATION=$mode
text=/tmp/validate-text.txt
cat README.md docs/*.md docs/*/*.md src/*/*.rs > $text 2>/dev/null
run() { # name, args...
  local name=$1; shift
  local t0=$(date +%s%N)
  "$bin" "$@" > "$out/$name.out" 2> "$out/$name.err"; local rc=$?
  local t1=$(date +%s%N)
  local vuids=$(grep -o 'VUID-[A-Za-z0-9_-]*\|SYNC-[A-Za-z0-9_-]*' "$out/$name.err" | sort | uniq -c | tr '\n' ' ')
  printf '%-28s rc=%d %6ss ids:[%s] %s\n' "$name" $rc $(( (t1 - t0) / 1000000000 )) "$vuids" "$(grep -h '^dualscope: validation' "$out/$name.err" | tail -1)" | tee -a "$out/summary.txt"
}
for w in $what; do case $w in
  ladders) for p in f32 f16; do for c in small bench; do run ladder-$c-$p ladder --config $c --precision $p --json; done; done ;;
  shapes) for p in f32 f16; do
      run ladder-b1t512-$p ladder --config bench --len 512 --precision $p --json
      run ladder-b64t256-$p ladder --config bench/configs/bench_b64.json --precision $p --json
    done ;;
  long) for p in f32 f16; do run ladder-small-$p-T4096 ladder --config small --precision $p --data $text --len 4096 --json; done ;;
  train) for p in f32 f16; do run train50-small-$p train --config small --engine gpu --precision $p --data $text --steps 50 --out /tmp/run-$p-$mode-$$; done ;;
  controller)
    for p in f32 f16; do
      run bench-controller-small-$p bench --engine gpu --config small --precision $p --controller --steps 5 --warmup 1 --json
      DUALSCOPE_HOST_NORMS=1 run train20-hostnorms-small-$p train --config small --engine gpu --precision $p --data $text --steps 20 --out /tmp/run-host-$p-$mode-$$
    done ;;
  triage)
    r=/tmp/triage-$mode-$$
    run train60-captures train --config small --engine gpu --precision f16 --data $text --steps 60 --out $r \
      --inject f16_overflow@30 --inject persistent@50 --capture-at 40
    for c in $r/captures/step_*; do run replay-$(basename $c) replay $c --json; done
    run drift-small-f32 drift --config small --data $text --steps 20 --json
    run drift-small-f16 drift --config small --precision f16 --data $text --steps 20 --json
    run scan-small-f16 scan --config small --engine gpu --precision f16 --data $text --seq-len 256 --max-windows 400 --out $r/scan --json ;;
  pmap)
    for m in all=f16,embed.bwd=f32 gru.rec=f32,attn.bwd=f32 embed=f32,gru.l0.input=f16,gru.l1.rec=f16,head=f32 all=f32,gru.l0.rec=f16; do
      tag=$(echo "$m" | tr '=,.' '-__')
      for md in isolated chained; do run ladder-bench-$tag-$md ladder --config bench --precision f16 --precision-map "$m" --mode $md --json; done
    done
    run train30-small-pmap train --config small --engine gpu --precision f16 --precision-map gru.rec=f32,head.bwd=f32 --data $text --steps 30 --out /tmp/run-pmap-$mode-$$
    run pbisect-bench precision-bisect --config bench --data $text --len 1024 --json ;;
esac; done
