#!/bin/bash
# On the device host: the grid recurrences' operand loads without `coherent`
# (gru_*_grid_nc, gru_*_grid_cm_nc; docs/speed.md, version 36). (a) Ladders,
# chained, under the validation layer of MODE (core by default; needs
# .device/vvl14.deb) on the shapes where the per-layer grid kernels run:
# `bench` f32, B=1 T=512 f32, B=5 T=100 f32 (bench width), `small` f32,
# B=64 T=256 mixed, and B=5 T=100 mixed with DUALSCOPE_WAVE=0 (a partial row
# block on the cooperative-matrix grid kernels). (b) `bench --engine gpu` with
# the coherent loads (DUALSCOPE_WAVE_COHERENT=1, before) and without, in
# one run, old new new old, at each shape of SHAPES: replayed wall and
# device medians and the recurrence kernels' per-kernel ms.
# Usage: bench/nc36_h200.sh BIN OUT [MODE]   (NC36_LADDERS=0 skips (a))
set -uo pipefail
BIN=$1; OUT=$2; MODE=${3:-core}
mkdir -p "$OUT"
cfg() { # NAME BATCH SEQ_LEN
  printf '{"vocab":256,"d_embed":256,"hidden":512,"layers":2,"attn_dim":256,"heads":4,"window":128,"batch":%s,"seq_len":%s}\n' "$2" "$3" > "$OUT/$1.json"
  echo "$OUT/$1.json"
}
if [ "${NC36_LADDERS:-1}" = 1 ]; then
  echo "== (a) ladders, chained, validation $MODE"
  mkdir -p /tmp/v14 && dpkg -x .device/vvl14.deb /tmp/v14
  for c in "bench:f32:bench:" "b1_t512:f32:$(cfg b1_t512 1 512):" "b5_t100:f32:$(cfg b5_t100 5 100):" \
           "small:f32:small:" "b64_t256:f16:$(cfg b64_t256 64 256):" "b5_t100_nowave:f16:$OUT/b5_t100.json:DUALSCOPE_WAVE=0"; do
    IFS=: read -r name prec config extra <<< "$c"
    env=(VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu DUALSCOPE_VK_VALIDATION=$MODE)
    [ -n "$extra" ] && env+=("$extra")
    t0=$(date +%s)
    env "${env[@]}" timeout 120 $BIN ladder --config "$config" --precision $prec --mode chained --json \
      > "$OUT/ladder-$name.json" 2> "$OUT/ladder-$name.err"
    rc=$?
    python3 bench/ladder_summary.py "$OUT/ladder-$name.json" "$name $prec: exit $rc, $(( $(date +%s) - t0 )) s" || tail -3 "$OUT/ladder-$name.err"
  done
fi
summary() { python3 bench/bench_summary.py "$1" "$2"; }  # FILE LABEL
echo "== (b) bench, coherent (old) against not (new), old new new old"
SHAPES=${SHAPES:-"--config bench --precision f32;--config bench --batch 1 --seq-len 512 --precision f32;--config small --precision f32;--config bench --batch 64 --seq-len 256 --precision f32;--config bench --batch 64 --seq-len 256 --precision mixed"}
IFS=';' read -ra shapes <<< "$SHAPES"
for shape in "${shapes[@]}"; do
  tag=$(echo "$shape" | tr -d ' -')
  i=0
  for which in old new new old; do
    i=$((i + 1)); env=(); [ $which = old ] && env=(DUALSCOPE_WAVE_COHERENT=1)
    env "${env[@]}" $BIN bench --engine gpu $shape --steps 20 --warmup 3 --json > "$OUT/bench-$tag-$which-$i.json" 2> "$OUT/bench-$tag-$which-$i.err"
    summary "$OUT/bench-$tag-$which-$i.json" "$tag $which"
  done
done
