#!/usr/bin/env bash
# gemm-bench sweep of the small-K / few-tile products of B=1 T=512 and small,
# per kernel and per shortest split-K slice (DUALSCOPE_SPLIT_MIN_SLICE).
# PATHS, SLICES and SETS pick the kernels, slices and shape sets; BENCH_SHAPES
# replaces the BENCH set.
BIN=$1; O=$2; mkdir -p "$O"
PATHS=${PATHS:-"coopmat coopmat64 big tiled"}; SLICES=${SLICES:-"default 128 64 32"}; SETS=${SETS:-"B1 SM BENCH"}
B1="256x512x512,ta 512x256x512,tb 1536x512x511,ta 512x512x256,acc 512x1536x256,tb 512x512x256 512x256x256,tb,acc 1536x512x512,ta 1536x256x512,ta 512x256x1536 512x256x256 256x256x512,ta 512x1536x512,tb 512x512x1536"
SM="1024x64x128,tb 1024x64x384 64x128x1024,ta 384x128x1016,ta 1024x128x64,acc 1024x64x256 1024x384x64,tb 1024x128x256 1024x256x128,tb 1024x256x64,tb,acc 384x128x1024,ta 1024x128x64 384x64x1024,ta 256x64x1024,ta 256x128x1024,ta 1024x128x384 1024x384x128,tb"
BENCH=${BENCH_SHAPES:-"8192x256x512,tb 256x512x8192,ta 8192x1536x256,tb 8192x512x256 1536x512x8160,ta"}
args() { for s in $1; do printf -- "--shape %s " "$s"; done; }
for path in $PATHS; do
  for ms in $SLICES; do
    if [ $ms = default ]; then unset DUALSCOPE_SPLIT_MIN_SLICE; else export DUALSCOPE_SPLIT_MIN_SLICE=$ms; fi
    for set in $SETS; do
      $BIN gemm-bench --path $path --reps 30 --json $(args "${!set}") > $O/g_${path}_${ms}_${set}.json 2>>$O/err.txt || echo "fail $path $ms $set" >> $O/err.txt
    done
  done
done
unset DUALSCOPE_SPLIT_MIN_SLICE
PATHS="$PATHS" SLICES="$SLICES" python3 - $O <<'PY'
import json,glob,sys,collections,os
O=sys.argv[1]
rows=collections.defaultdict(dict)
for f in glob.glob(O+"/g_*.json"):
    _,path,ms,st=f.rsplit("/",1)[1][:-5].split("_")
    try: d=json.load(open(f))
    except Exception: continue
    for r in d["shapes"]:
        key=(st,f"{r['m']}x{r['n']}x{r['k']}"+(",ta" if r["ta"] else "")+(",tb" if r["tb"] else "")+(",acc" if r["acc"] else ""))
        rows[key][f"{path}/{ms}"]=r["median_ms"]*1000
cols=[f"{p}/{m}" for p in os.environ["PATHS"].split() for m in os.environ["SLICES"].split()]
print("shape".ljust(28)+" ".join(c[:12].rjust(12) for c in cols))
for key in sorted(rows):
    print((key[0]+" "+key[1]).ljust(28)+" ".join(("%.1f"%rows[key][c]).rjust(12) if c in rows[key] else " "*12 for c in cols))
PY
