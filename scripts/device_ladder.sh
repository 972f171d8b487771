set -x
for f in .device/*.deb; do dpkg -x $f / ; done; ldconfig
cat docs/*.md src/cpu/*.rs src/vk/*.rs > /tmp/real.txt; wc -c /tmp/real.txt
B=.device/dualscope
export DUALSCOPE_VK_VALIDATION=1
$B gpu-info | head -3
for cfg in small bench; do for mode in isolated chained; do
  /usr/bin/time -f "%e s" $B ladder --config $cfg --mode $mode --out $OUT/ladder-$cfg-$mode.json > $OUT/ladder-$cfg-$mode.txt 2>&1; echo "$cfg $mode exit $?"; grep -E "^[a-z_]+ +(pass|warn|fail)|end-to-end|errors" $OUT/ladder-$cfg-$mode.txt | cut -c1-120
done; done
for mode in isolated chained; do
  $B ladder --config small --data /tmp/real.txt --offset 1000 --len 4096 --mode $mode --out $OUT/ladder-4096-$mode.json > $OUT/ladder-4096-$mode.txt 2>&1; echo "4096 $mode exit $?"; grep -E "^[a-z_]+ +(pass|warn|fail)|end-to-end" $OUT/ladder-4096-$mode.txt | cut -c1-120
done
