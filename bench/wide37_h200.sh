#!/bin/bash
# On the device host: wavefronts of up to 256 workgroups, two to an SM
# (DUALSCOPE_WAVE_WIDE=1; docs/speed.md, version 37), where B > 32 at the
# bench width leaves each layer 128 workgroups or more. (a) The mixed ladder,
# chained, with the wide wavefronts under the validation layer (MODE, default
# core; needs .device/vvl14.deb) at B=64 T=256 and B=48 T=100. (b) `bench
# --precision mixed` at B=64 T=256 and B=48 T=256 without and with them, old
# new new old: replayed wall and device medians, which recurrence ran.
# Usage: bench/wide37_h200.sh BIN OUT [MODE]
set -uo pipefail
BIN=$1; OUT=$2; MODE=${3:-core}
mkdir -p "$OUT" /tmp/v14 && dpkg -x .device/vvl14.deb /tmp/v14
cfg() { # NAME BATCH SEQ_LEN
  printf '{"vocab":256,"d_embed":256,"hidden":512,"layers":2,"attn_dim":256,"heads":4,"window":128,"batch":%s,"seq_len":%s}\n' "$2" "$3" > "$OUT/$1.json"
  echo "$OUT/$1.json"
}
echo "== (a) the mixed ladder, chained, wide wavefronts, validation $MODE"
for c in "b64_t256:$(cfg b64_t256 64 256)" "b48_t100:$(cfg b48_t100 48 100)"; do
  name=${c%%:*}; config=${c#*:}
  t0=$(date +%s)
  env VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu \
    DUALSCOPE_VK_VALIDATION=$MODE DUALSCOPE_WAVE_WIDE=1 timeout 120 $BIN ladder --config "$config" --precision f16 \
    --mode chained --json > "$OUT/ladder-$name.json" 2> "$OUT/ladder-$name.err"
  rc=$?
  python3 bench/ladder_summary.py "$OUT/ladder-$name.json" "$name: exit $rc, $(( $(date +%s) - t0 )) s" || tail -3 "$OUT/ladder-$name.err"
done
echo "== (b) bench --precision mixed, per-layer grids (old) against wide wavefronts (new)"
for b in 64 48; do
  i=0
  for which in old new new old; do
    i=$((i + 1)); env=(); [ $which = new ] && env=(DUALSCOPE_WAVE_WIDE=1)
    f="$OUT/bench-b$b-$which-$i.json"
    env "${env[@]}" $BIN bench --engine gpu --config bench --batch $b --seq-len 256 --precision mixed --steps 20 --warmup 3 --json > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "B=$b $which"
  done
done
