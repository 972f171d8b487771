#!/bin/bash
# Version 58 on the device host (the recurrences' barrier over one row block):
# the cooperative-matrix and FMA recurrence tests under layer 1.4.309, then
# the step of the old and new binaries, old new new old, at issue 19's shapes.
# Usage: bench/rows58_h200.sh OUT (binaries as .device/*.xz, see ../shared/GPU.md)
set -u
OUT=$1
for f in .device/lib*.deb; do dpkg -x "$f" /; done; ldconfig
for b in old new new1 vk_mixed vk_wave_fma; do [ -f .device/$b.xz ] && xz -dkf .device/$b.xz && chmod +x .device/$b; done
mkdir -p /tmp/v14 /tmp/r58/tests && dpkg -x .device/vvl14.deb /tmp/v14
for t in vk_mixed vk_wave_fma; do
  VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu \
    DUALSCOPE_VK_VALIDATION=core timeout 240 .device/$t --test-threads 1 --nocapture > /tmp/r58/tests/$t.out 2>&1
  echo "$t rc=$? $(grep -c 'test result: ok' /tmp/r58/tests/$t.out) ok-lines"
  grep -E '^test |test result|not installed|validation' /tmp/r58/tests/$t.out | head -20
done
SHAPES=${SHAPES:-"bench:mixed:--config bench;small:mixed:--config small;b1t512:mixed:--config bench --batch 1 --seq-len 512;b64:mixed:--config bench --batch 64 --seq-len 256"} \
  KERNELS=${KERNELS:-gru} bench/ab_kernels_h200.sh .device/old .device/new /tmp/r58/ab
# A third binary (a variant) against the new one, at SHAPES3.
[ -x .device/new1 ] && SHAPES=${SHAPES3:-"bench:mixed:--config bench"} KERNELS=${KERNELS:-gru} \
  bench/ab_kernels_h200.sh .device/new1 .device/new /tmp/r58/ab_variant
tar czf "$OUT/r58.tgz" -C /tmp r58
# Then bench/validate_h200.sh with the new binary, in stages (each its own
# archive, so that a stage cut by the call's time limit loses only itself):
# VAL1, VAL2, then VAL3 if the call has run under 300 s, cut at 570 s.
i=0
for v in "${VAL1:-}" "${VAL2:-}" "${VAL3:-}"; do
  i=$((i + 1)); [ -z "$v" ] && continue
  if [ $i = 3 ]; then [ $SECONDS -lt 300 ] || continue; lim=$((570 - SECONDS)); else lim=560; fi
  timeout $lim bench/validate_h200.sh .device/new core /tmp/val58_$i $v
  tar czf "$OUT/val58_$i.tgz" -C /tmp val58_$i
done
