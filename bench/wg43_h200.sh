#!/bin/bash
# On the device host: version 43, the one-workgroup recurrences without local
# memory (gru_*_wg_cm, docs/speed.md "wg19"). (a) The driver's statistics of
# both kernels (registers, local memory); (b) `bench --precision mixed` at
# `small` and at `small --batch 16`, DUALSCOPE_WG=0 (the wavefronts) and =1
# (the one-workgroup kernels), interleaved 0 1 1 0: replayed medians and the
# recurrence kernels' per-kernel ms; (c) the mixed ladder, chained, with the
# one-workgroup kernels at `small`, B=5 T=100 and B=16; (d) optional TESTBIN
# (`cargo test --release --no-run --test vk_mixed`): its coopmat tests.
# Usage: bench/wg43_h200.sh BIN OUT [TESTBIN]   (WG43_STEPS: bench steps, default 50)
set -uo pipefail
BIN=$1; OUT=$2; TESTBIN=${3:-}
mkdir -p "$OUT"
echo "== (a) pipeline statistics of the one-workgroup kernels"
DUALSCOPE_WG=1 DUALSCOPE_PIPELINE_STATS=1 $BIN bench --engine gpu --precision mixed --config small --steps 2 --warmup 1 \
  > "$OUT/stats.out" 2> "$OUT/stats.err"
grep -E "pipeline gru_(fwd|bwd)_(wg|wave)" "$OUT/stats.err" | sed 's/, Binary Size=[0-9]*//'
echo
echo "== (b) bench --precision mixed, replayed; DUALSCOPE_WG=0 against =1, interleaved 0 1 1 0"
for shape in "small:" "small_b16:--batch 16"; do
  name=${shape%%:*}; extra=${shape#*:}
  for wg in 0 1 1 0; do
    f="$OUT/bench-$name-wg$wg.json"; [ -e "$f" ] && f="${f%.json}-b.json"
    # shellcheck disable=SC2086
    DUALSCOPE_WG=$wg $BIN bench --engine gpu --precision mixed --config small $extra --steps ${WG43_STEPS:-50} --warmup 10 --json \
      > "$f" 2> "${f%.json}.err"
    python3 bench/bench_summary.py "$f" "$name WG=$wg"
  done
done
echo
echo "== (c) the mixed ladder, chained, with the one-workgroup kernels (DUALSCOPE_WG=1)"
cfg() { # NAME BATCH SEQ_LEN
  printf '{"vocab":256,"d_embed":64,"hidden":128,"layers":2,"attn_dim":64,"heads":4,"window":32,"batch":%s,"seq_len":%s}\n' "$2" "$3" > "$OUT/$1.json"
  echo "$OUT/$1.json"
}
for c in "small:small" "b5_t100:$(cfg b5_t100 5 100)" "b16:$(cfg b16 16 128)"; do
  name=${c%%:*}; config=${c#*:}
  DUALSCOPE_WG=1 $BIN ladder --config "$config" --precision f16 --mode chained --json \
    > "$OUT/ladder-$name.json" 2> "$OUT/ladder-$name.err"
  rc=$?
  python3 bench/ladder_summary.py "$OUT/ladder-$name.json" "$name: exit $rc" || tail -3 "$OUT/ladder-$name.err"
done
if [ -n "$TESTBIN" ]; then
  echo
  echo "== (d) tests/vk_mixed.rs: the cooperative-matrix recurrences (one workgroup and grid)"
  $TESTBIN --test-threads 1 coopmat 2>&1 | grep -E "^test |test result|panicked" | tee "$OUT/vk_mixed.txt"
fi
