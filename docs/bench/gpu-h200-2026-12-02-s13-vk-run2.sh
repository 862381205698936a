#!/bin/bash
# vk helper, session 13, run 2 (one H200): the Vulkan device tests (`matmul`,
# LOWBIT_REQUIRE_VULKAN=1) of the final build; the A/B of the new tiled defaults (Q8_0 8x2x2,
# MXFP4 16x2x1, ROCmFP3 constant-index 16x2x1) against run 1's binary (`lowbit_old`: this
# branch's first commit, session 12's defaults), alternated old new old new (round 2 at
# 16384x16384 only: device budget); ROCmFP2's tiled shapes again with the new 8x4x1. Carry [".vk-helper", ".gl"].
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LOWBIT_VK_CACHE_DIR=/tmp/vkc
for b in lowbit lowbit_old matmul; do xz -dc .vk-helper/$b.xz > /tmp/$b; chmod +x /tmp/$b; done
L=$OUT/run2.log; J=$OUT/vk-2026-12-02-s13-vk-run2
S2=16384x16384,14336x4096
{ date -u +%T; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $L 2>&1
echo "== tests $(date -u +%T)" >> $L
LOWBIT_REQUIRE_VULKAN=1 timeout 75 /tmp/matmul >> $L 2>&1; echo "rc $? $(date -u +%T)" >> $L
ab() { # round binary shapes
  echo "== A/B round $1: $2 $(date -u +%T)" >> $L
  timeout 30 /tmp/$2 bench --backend vulkan --format Q8_0,MXFP4,ROCMFP3 --shape $3 --n 1,8 --json $J-ab-$2-$1.json >> $L 2>&1
  echo "rc $? $(date -u +%T)" >> $L
}
ab 1 lowbit_old $S2; ab 1 lowbit $S2
ab 2 lowbit_old 16384x16384; ab 2 lowbit 16384x16384
echo "== ROCmFP2 sweep $(date -u +%T)" >> $L
LOWBIT_VK_STATS=1 timeout 12 /tmp/lowbit bench --backend vulkan --format ROCMFP2 --shape 16384x16384 --n 8 --vk-sweep --json $J-fp2.json >> $L 2>&1
echo "rc $? $(date -u +%T)" >> $L
grep -v "^vk-stats" $L | tail -c 11000
