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
    python3 - "$OUT/ladder-$name.json" "$name $prec: exit $rc, $(( $(date +%s) - t0 )) s" <<'PY' || tail -3 "$OUT/ladder-$name.err"
import json, sys
r = json.load(open(sys.argv[1]))
v = r.get("validation") or {}
gru = [k for k in v.get("kernels", []) if k.startswith("gru_")]
print(f"  {sys.argv[2]}; status {r['status']}; validation on {v.get('on')}, errors {v.get('errors')}; recurrence kernels {gru}")
for x in r["rungs"]:
    worst = max(x["cases"], key=lambda c: float(c["rel_l2"]) / max(float(c["tolerance"]), 1e-30)) if x["cases"] else None
    w = f"worst {worst['name']}: {float(worst['rel_l2']):.2e} of {float(worst['tolerance']):.1e}" if worst else ""
    print(f"    {x['id']:<10} {x['status']:<5} {w}")
e = r.get("end_to_end")
if e:
    print(f"    end_to_end {e['status']}: loss rel {float(e['loss_rel_err']):.2e} (gate {float(e['loss_tolerance']):.1e})")
PY
  done
fi
summary() { # FILE LABEL
  python3 - "$1" "$2" <<'PY'
import json, sys
f = lambda x: "-" if x is None else f"{x:.3f}"
try:
    g = [e for e in json.load(open(sys.argv[1]))["engines"] if e.get("engine") == "gpu"][0]
    rec = g.get("recurrence") or {}
    ks = [(k["kernel"], k["ms"]) for k in g.get("kernels_ms", []) if "recurrence" in k["kernel"]]
    print(f"  {sys.argv[2]:<28} replay {f(g.get('replay_median_ms'))} ms, device {f(g.get('replay_device_median_ms'))};"
          f" loads {rec.get('grid_loads')}, waves {rec.get('wave_loads')}; recurrence kernels {f(rec.get('recurrence_ms'))} ms;"
          f" first loss {g.get('first_loss')}")
except Exception as e:
    print(f"  {sys.argv[2]}: no report ({e})")
PY
}
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
