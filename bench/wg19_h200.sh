#!/bin/bash
# On the device host: the small layers' recurrences in one workgroup
# (gru_*_wg_cm, docs/speed.md "wg19"). (a) The mixed ladder, chained, with
# the new kernels (the default where they fit) at `small` (B=8 T=128), at
# B=5 T=100 and at B=16 (T=128): every verdict. (b) `bench --precision mixed`
# at `small` and (c) at `small --batch 16`, with DUALSCOPE_WG=0 (the
# wavefronts, before) and with the new kernels: the replayed wall and device
# medians, which recurrence ran, and the recurrence kernels' per-kernel ms.
# Optional (TESTBIN): the coopmat tests of tests/vk_mixed.rs (built with
# `cargo test --release --no-run --test vk_mixed`). Under 4 minutes.
# Usage: bench/wg19_h200.sh BIN OUT [TESTBIN]   (WG19_STEPS, WG19_WARMUP: bench steps, default 50, 10)
set -uo pipefail
BIN=$1; OUT=$2; TESTBIN=${3:-}
mkdir -p "$OUT"
# The ladder takes its batch shape from the config: small with other B, T.
cfg() { # NAME BATCH SEQ_LEN
  printf '{"vocab":256,"d_embed":64,"hidden":128,"layers":2,"attn_dim":64,"heads":4,"window":32,"batch":%s,"seq_len":%s}\n' "$2" "$3" > "$OUT/$1.json"
  echo "$OUT/$1.json"
}
echo "== (a) the mixed ladder, chained, with the one-workgroup recurrences"
for c in "small:small" "b5_t100:$(cfg b5_t100 5 100)" "b16:$(cfg b16 16 128)"; do
  name=${c%%:*}; config=${c#*:}
  for wg in new old; do
    env=(); [ $wg = old ] && env=(DUALSCOPE_WG=0)
    t0=$(date +%s)
    env "${env[@]}" $BIN ladder --config "$config" --precision f16 --mode chained --json \
      > "$OUT/ladder-$name-$wg.json" 2> "$OUT/ladder-$name-$wg.err"
    rc=$?
    python3 bench/ladder_summary.py "$OUT/ladder-$name-$wg.json" "$name $wg: exit $rc, $(( $(date +%s) - t0 )) s" || tail -3 "$OUT/ladder-$name-$wg.err"
  done
done
summary() { python3 bench/bench_summary.py "$1" "$2"; }  # FILE LABEL
echo
echo "== (b, c) bench --precision mixed, replayed; old (DUALSCOPE_WG=0) against new"
for shape in "small:" "small_b16:--batch 16"; do
  name=${shape%%:*}; extra=${shape#*:}
  for wg in old new; do
    env=(); [ $wg = old ] && env=(DUALSCOPE_WG=0)
    # shellcheck disable=SC2086
    env "${env[@]}" $BIN bench --engine gpu --precision mixed --config small $extra --steps ${WG19_STEPS:-50} --warmup ${WG19_WARMUP:-10} --json \
      > "$OUT/bench-$name-$wg.json" 2> "$OUT/bench-$name-$wg.err"
    echo "  bench $name $wg: exit $?"
    summary "$OUT/bench-$name-$wg.json" "$name $wg"
  done
done
if [ -n "$TESTBIN" ]; then
  echo
  echo "== tests/vk_mixed.rs: the cooperative-matrix recurrences (one workgroup and grid)"
  $TESTBIN --test-threads 1 coopmat 2>&1 | grep -E "^test |test result|panicked" | tee "$OUT/vk_mixed.txt"
fi
