#!/usr/bin/env bash
# On the H200 host (through the device tool): the mixed-precision step.
#   - rung 1 in f16 on the 128×128 cooperative-matrix kernel, the old 64×64
#     one and the tiled f16 kernel (bench config);
#   - rungs 2–11 and the end-to-end gate in f16, small and bench, both modes;
#   - the f16_accum_no_scale fault against the mixed ladder;
#   - GEMM rates of every f16 kernel, and the step timed in f32 and mixed.
# Debian 12's validation layer predates VK_KHR_cooperative_matrix and switches
# the cooperative-matrix path off, so the coopmat runs go without it; the tiled
# f16 path also runs with it (its results must agree).
# Usage: scripts/device_mixed.sh BIN OUTDIR
set -uo pipefail
B=$1; OUT=$2; mkdir -p "$OUT"
S="$OUT/mixed_summary.txt"
: > "$S"
$B gpu-info > "$OUT/gpu_info.txt" 2>&1
run() { # validation, tag, ladder args...
  local val=$1 tag=$2; shift 2
  DUALSCOPE_VK_VALIDATION=$val $B ladder "$@" --out "$OUT/l-$tag.json" > /tmp/l-$tag.txt 2>&1
  echo "== $tag (validation $val): exit $?" >> "$S"
  grep -E "^[a-z_]+ +(pass|warn|fail)|end-to-end|products on|validation" /tmp/l-$tag.txt | cut -c1-200 >> "$S"
  grep -E "^  (fail|warn)" /tmp/l-$tag.txt | head -20 | cut -c1-200 >> "$S"
}
for p in coopmat coopmat64 tiled; do run 0 gemm-$p --rungs gemm --precision f16 --gemm-path $p --config bench; done
run 1 gemm-tiled-val --rungs gemm --precision f16 --gemm-path tiled --config bench
for cfg in small bench; do
  for mode in isolated chained; do
    run 0 $cfg-$mode-f16 --config $cfg --mode $mode --precision f16
  done
done
run 1 small-chained-f16-tiled-val --config small --mode chained --precision f16 --gemm-path tiled
run 0 fault-f16-accum --config small --precision f16 --fault f16_accum_no_scale
G="$OUT/gemm_bench.txt"
: > "$G"
for p in tiled tiled-f16-range coopmat64 coopmat; do
  DUALSCOPE_VK_VALIDATION=0 $B gemm-bench --path $p --shape 8192x1536x512 --shape 8192x256x768 \
    --shape 1536x512x8192 --shape 512x512x8192 --shape 4096x4096x4096 >> "$G" 2>&1
done
for prec in f32 mixed; do
  DUALSCOPE_VK_VALIDATION=0 $B bench --engine gpu --config bench --precision $prec --steps 20 --warmup 3 \
    --breakdown --json > "$OUT/bench-$prec.json" 2> "$OUT/bench-$prec.err"
  DUALSCOPE_VK_VALIDATION=0 $B bench --engine gpu --config bench --precision $prec --steps 20 --warmup 3 \
    --breakdown >> "$OUT/bench.txt" 2>&1
done
cat "$S" "$G" "$OUT/bench.txt" | cut -c1-200
