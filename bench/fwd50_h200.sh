#!/bin/bash
# On the device host, session 18: version 50 (the balanced forward wavefront)
# against version 49. First the cooperative-matrix and FMA wavefront tests
# (test binaries built here, stripped) under validation layer 1.4.309, then
# bench/version_ab_h200.sh OLD NEW (old new new old; the new binary's ladders
# and carry check under validation), then the new binary's ladders at
# B=1 T=512 and B=64 under validation (SHAPES_VAL=0: not). Usage:
#   bench/fwd50_h200.sh OLD_BIN NEW_BIN VK_MIXED_TEST VK_WAVE_FMA_TEST OUT
set -uo pipefail
OLD=$1; NEW=$2; TMIX=$3; TFMA=$4; OUT=$5
mkdir -p "$OUT/tests" /tmp/v14 && dpkg -x .device/vvl14.deb /tmp/v14
for t in "$TMIX the_coopmat_recurrences" "$TFMA"; do
  set -- $t; name=$(basename "$1")
  DUALSCOPE_VK_VALIDATION=core VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d \
    LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu timeout 150 "$@" --test-threads 1 \
    > "$OUT/tests/$name.out" 2>&1
  echo "$name rc=$? $(grep -h 'test result' "$OUT/tests/$name.out" | tail -1)" | tee -a "$OUT/tests/summary.txt"
done
bench/version_ab_h200.sh "$OLD" "$NEW" "$OUT/ab" > "$OUT/ab.txt" 2>&1
cat "$OUT/ab.txt"
[ "${SHAPES_VAL:-1}" = 1 ] && bench/validate_h200.sh "$NEW" core "$OUT/ab/val" shapes > /dev/null 2>&1
cat "$OUT/ab/val/summary.txt"
