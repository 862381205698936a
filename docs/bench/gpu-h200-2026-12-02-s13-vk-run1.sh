#!/bin/bash
# vk helper, session 13, run 1 (one H200): the tiled (n = 8) kernels' shapes swept with the
# constant-index epilogue (LOWBIT_VK_TILE_ROLLED=0), every compiled shape (`--vk-sweep`;
# this build adds 2-row and 1-row shapes), at 16384x16384 and 14336x4096. The binary is
# this branch's first commit (new shapes compiled, no default changed: also the "old" of
# run 2's A/B). Carry [".vk-helper", ".gl"].
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LOWBIT_VK_CACHE_DIR=/tmp/vkc
xz -dc .vk-helper/lowbit_old.xz > /tmp/lowbit; chmod +x /tmp/lowbit
L=$OUT/run1.log; J=$OUT/vk-2026-12-02-s13-vk-run1
S2=16384x16384,14336x4096
{ date -u +%T; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $L 2>&1
sw() { # name timeout shapes formats [env...]
  local n=$1 t=$2 s=$3 f=$4; shift 4
  echo "== $n: $* --format $f --shape $s $(date -u +%T)" >> $L
  env "$@" LOWBIT_VK_STATS=1 timeout $t /tmp/lowbit bench --backend vulkan --format $f --shape $s --n 8 --vk-sweep --json $J-$n.json >> $L 2>&1
  echo "rc $? $(date -u +%T)" >> $L
}
sw a 75 $S2 ROCMFP2,MXFP4,NVFP4 LOWBIT_VK_TILE_ROLLED=0
sw b 60 $S2 PQ2_0,ROCMFP3 LOWBIT_VK_TILE_ROLLED=0
sw c 25 16384x16384 HFP4G32 LOWBIT_VK_TILE_ROLLED=0
sw d 45 $S2 Q8_0,Q4_0,Q4_1 LOWBIT_VK_TILE_ROLLED=0
date -u +%T >> $L
grep -v "^vk-stats" $L | tail -c 11000
