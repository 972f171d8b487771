#!/bin/bash
# On the device host, session 18: version 52 (layer 0's input bias added in the
# forward wavefront, no pass of its own) against the binary before it: the
# wavefront tests (test binaries built here) and the f16 ladders at small,
# bench and B=1 T=512 under validation layer 1.4.309, then the mixed step old
# new new old (bench/ab_mixed_h200.sh). Usage:
#   bench/bias52_h200.sh OLD_BIN NEW_BIN VK_MIXED_TEST VK_WAVE_FMA_TEST OUT
set -uo pipefail
OLD=$1; NEW=$2; TMIX=$3; TFMA=$4; OUT=$5
mkdir -p "$OUT/tests" "$OUT/val" /tmp/v14 && dpkg -x .device/vvl14.deb /tmp/v14
export VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu
for t in "$TMIX the_coopmat_recurrences" "$TFMA"; do
  set -- $t; name=$(basename "$1")
  DUALSCOPE_VK_VALIDATION=core timeout 150 "$@" --test-threads 1 > "$OUT/tests/$name.out" 2>&1
  echo "$name rc=$? $(grep -h 'test result' "$OUT/tests/$name.out" | tail -1)" | tee -a "$OUT/tests/summary.txt"
done
for s in "small:--config small" "bench:--config bench" "b1t512:--config bench --len 512"; do
  tag=${s%%:*}; args=${s#*:}
  DUALSCOPE_VK_VALIDATION=core "$NEW" ladder $args --precision f16 --json > "$OUT/val/ladder-$tag-f16.out" 2> "$OUT/val/ladder-$tag-f16.err"
  echo "ladder-$tag-f16 rc=$? $(grep -h '^dualscope: validation' "$OUT/val/ladder-$tag-f16.err" | tail -1)" | tee -a "$OUT/val/summary.txt"
done
unset VK_LAYER_PATH LD_LIBRARY_PATH
bench/ab_mixed_h200.sh "$OLD" "$NEW" "$OUT/ab"
