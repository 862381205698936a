#!/bin/bash
# vk helper, session 12, run 2 (one H200, the final build): the new defaults of the formats
# this session changed (Q4_1's tiled kernel, PTQ1_0 on PQ2_0's kernels, the rotated n = 1
# kernels of PQ2_0 / TQ2_0 / ROCmFP3, the rolled epilogue of Q8_0 / Q4_0 / ROCmFP3), then
# a sweep of the tiled shapes of Q8_0, Q4_0 and ROCmFP3 with the constant-index epilogue
# (their defaults are rolled; the shapes were chosen under the rolled form in session 10),
# then the Vulkan device tests (`matmul`, LOWBIT_REQUIRE_VULKAN=1). Carry [".vk-helper", ".gl"].
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LOWBIT_VK_CACHE_DIR=/tmp/vkc
for b in lowbit matmul; do xz -dc .vk-helper/$b.xz > /tmp/$b; chmod +x /tmp/$b; done
L=$OUT/run2.log; J=$OUT/vk-2026-12-02-s12-vk-run2
{ date -u +%T; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $L 2>&1
echo "== new defaults $(date -u +%T)" >> $L
timeout 15 /tmp/lowbit bench --backend vulkan --format Q4_1,PTQ1_0 --shape 16384x16384 --n 1,8 --json $J-defaults.json >> $L 2>&1; echo "rc $?" >> $L
echo "== constant-index sweep $(date -u +%T)" >> $L
LOWBIT_VK_TILE_ROLLED=0 timeout 20 /tmp/lowbit bench --backend vulkan --format Q8_0,Q4_0,ROCMFP3 --shape 16384x16384 --n 8 --vk-sweep --json $J-sweep-c.json >> $L 2>&1; echo "rc $?" >> $L
echo "== tests $(date -u +%T)" >> $L
LOWBIT_REQUIRE_VULKAN=1 timeout 85 /tmp/matmul >> $L 2>&1; echo "rc $? $(date -u +%T)" >> $L
tail -c 11000 $L
