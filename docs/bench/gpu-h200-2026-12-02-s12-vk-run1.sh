#!/bin/bash
# vk helper, session 12, run 1 (one H200): the tiled epilogue per format (rolled vs constant
# index, against main's binary), Q4_1's new tiled kernel (shape sweep), PTQ1_0 on PQ2_0's
# layout, and the rotated-load n = 1 kernels (sweep with register counts, then an A/B).
# Run from the repository root with carry [".vk-helper", ".gl"]; writes to $OUT.
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LOWBIT_VK_CACHE_DIR=/tmp/vkc
for b in lowbit lowbit_old; do xz -dc .vk-helper/$b.xz > /tmp/$b; chmod +x /tmp/$b; done
L=$OUT/run1.log; S=16384x16384
J=$OUT/vk-2026-12-02-s12-vk-run1
{ date -u +%T; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $L 2>&1
b() { echo "-- $* $(date -u +%T)" >> $L; timeout 60 "$@" >> $L 2>&1; echo "rc $?" >> $L; }
T=Q8_0,Q4_0,Q4_1,ROCMFP2,ROCMFP3,MXFP4,NVFP4,PQ2_0,PTQ1_0
echo "== epilogue A/B, n = 8 (old = main d97b228; r1 = rolled, r0 = constant index)" >> $L
for r in 1 2; do
  b /tmp/lowbit_old bench --backend vulkan --format $T --shape $S --n 8 --json $J-epi-old-$r.json
  LOWBIT_VK_TILE_ROLLED=1 b /tmp/lowbit bench --backend vulkan --format $T --shape $S --n 8 --json $J-epi-r1-$r.json
  LOWBIT_VK_TILE_ROLLED=0 b /tmp/lowbit bench --backend vulkan --format $T --shape $S --n 8 --json $J-epi-r0-$r.json
done
echo "== Q4_1 tiled sweep (both epilogues)" >> $L
for e in 1 0; do
  LOWBIT_VK_TILE_ROLLED=$e LOWBIT_VK_STATS=1 b /tmp/lowbit bench --backend vulkan --format Q4_1 --shape $S,14336x4096 --n 8 --vk-sweep --json $J-q41-r$e.json
done
R=ROCMFP2,ROCMFP3,MXFP4,NVFP4,PQ2_0,TQ2_0
echo "== rotated loads, n = 1 sweep (o0 = plain, o1 = rotated)" >> $L
for o in 0 1; do
  LOWBIT_VK_ROTATE=$o LOWBIT_VK_STATS=1 b /tmp/lowbit bench --backend vulkan --format $R --shape $S --n 1 --vk-sweep --json $J-rot$o-sweep.json
done
echo "== rotated loads A/B, n = 1, default shapes; PTQ1_0 old vs new" >> $L
for r in 1 2; do
  b /tmp/lowbit_old bench --backend vulkan --format $R,PTQ1_0 --shape $S --n 1 --json $J-n1-old-$r.json
  LOWBIT_VK_ROTATE=0 b /tmp/lowbit bench --backend vulkan --format $R,PTQ1_0 --shape $S --n 1 --json $J-n1-o0-$r.json
  LOWBIT_VK_ROTATE=1 b /tmp/lowbit bench --backend vulkan --format $R,PTQ1_0 --shape $S --n 1 --json $J-n1-o1-$r.json
done
date -u +%T >> $L
grep -v "^vk-stats" $L | tail -c 11500
