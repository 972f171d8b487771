#!/bin/bash
# Version 59 on the device host (the GEMM kernels read the old C and the bias
# before they store): tests/vk_gemm.rs and tests/vk_gemm_bias.rs under layer
# 1.4.309 (the cooperative-matrix kernel runs there only), the step of the old
# and new binaries old new new old with the products' per-kernel medians,
# then bench/device_speed.sh with the new binary at TABLE_SHAPES if the call
# has time left, then bench/validate_h200.sh's stages VAL (cut at 570 s).
# AB=0 skips the A/B.
# Usage: bench/store59_h200.sh OUT (binaries as .device/*.xz, see ../shared/GPU.md)
set -u
OUT=$1
for f in .device/lib*.deb; do dpkg -x "$f" /; done; ldconfig
for b in old new vk_gemm vk_gemm_bias; do [ -f .device/$b.xz ] && xz -dkf .device/$b.xz && chmod +x .device/$b; done
mkdir -p /tmp/v14 /tmp/s59/tests && dpkg -x .device/vvl14.deb /tmp/v14
for t in vk_gemm vk_gemm_bias; do
  [ -x .device/$t ] || continue
  VK_LAYER_PATH=/tmp/v14/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/v14/usr/lib/x86_64-linux-gnu \
    DUALSCOPE_VK_VALIDATION=core timeout 240 .device/$t --test-threads 1 --nocapture > /tmp/s59/tests/$t.out 2>&1
  echo "$t rc=$? $(grep -c 'test result: ok' /tmp/s59/tests/$t.out) ok-lines"
  grep -E '^test |test result|not installed|validation|coopmat|cooperative' /tmp/s59/tests/$t.out | head -30
done
[ "${AB:-1}" = 1 ] && SHAPES=${SHAPES:-"bench:mixed:--config bench;bench:f32:--config bench;b64:mixed:--config bench --batch 64 --seq-len 256"} \
  KERNELS=${KERNELS:-gemm} bench/ab_kernels_h200.sh .device/old .device/new /tmp/s59/ab
tar czf "$OUT/s59.tgz" -C /tmp s59
if [ -n "${TABLE_SHAPES:-}" ] && [ $SECONDS -lt 400 ]; then
  SHAPES=$TABLE_SHAPES TORCH_MODES=graph TORCH_CPU=0 timeout $((570 - SECONDS)) bench/device_speed.sh .device/new /tmp/table > /tmp/table.log 2>&1
  cat /tmp/table.log | tail -40
  tar czf "$OUT/table.tgz" -C /tmp table table.log
fi
if [ -n "${VAL:-}" ] && [ $SECONDS -lt 500 ]; then
  echo "validation from ${SECONDS}s"
  timeout $((570 - SECONDS)) bench/validate_h200.sh .device/new core /tmp/val59 $VAL
  tar czf "$OUT/val59.tgz" -C /tmp val59
fi
# TABLE_AFTER: bench/device_speed.sh at these shapes after the validation, if
# the call has run under 380 s (cut at 570 s).
if [ -n "${TABLE_AFTER:-}" ] && [ $SECONDS -lt 380 ]; then
  SHAPES=$TABLE_AFTER TORCH_MODES=graph TORCH_CPU=0 timeout $((570 - SECONDS)) bench/device_speed.sh .device/new /tmp/table2 > /tmp/table2.log 2>&1
  tail -20 /tmp/table2.log
  tar czf "$OUT/table2.tgz" -C /tmp table2 table2.log
fi
