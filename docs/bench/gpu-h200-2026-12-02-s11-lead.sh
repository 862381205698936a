#!/bin/bash
# lead, session 11: device tests of the merged HIP and Vulkan backends, then the GPU sweeps.
export PATH=$PATH:/usr/local/cuda/bin
L=$OUT/lead.log; cd .lead-dev; xz -d *.xz; chmod +x lowbit lowbit_old vs_reference vk_matmul
{ date -u +%T; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $L 2>&1
echo "== hip tests $(date -u +%T)" >> $L; LOWBIT_HIP_CACHE_DIR=/tmp/hc LOWBIT_REQUIRE_HIP=1 timeout 150 ./vs_reference >> $L 2>&1; echo "rc $? $(date -u +%T)" >> $L
echo "== vk tests $(date -u +%T)" >> $L; LOWBIT_REQUIRE_VULKAN=1 timeout 120 ./vk_matmul >> $L 2>&1; echo "rc $? $(date -u +%T)" >> $L
ALL=Q8_0,Q4_0,Q4_1,Q6_K,Q4_K,NVFP4,MXFP4,ROCMFP2,ROCMFP3,PQ2_0,TQ2_0,PTQ1_0,HFP4G32
echo "== hip sweep $(date -u +%T)" >> $L; LOWBIT_HIP_CACHE_DIR=/tmp/hc timeout 90 ./lowbit bench --backend hip --format $ALL --shape 16384x16384 --n 1,8 --json $OUT/hip-h200-2026-12-02-s11-lead.json >> $L 2>&1; echo "rc $?" >> $L
echo "== vk sweep $(date -u +%T)" >> $L; timeout 90 ./lowbit bench --backend vulkan --format $ALL --shape 16384x16384 --n 1,8 --json $OUT/vk-h200-2026-12-02-s11-lead.json >> $L 2>&1; echo "rc $?" >> $L
T10=Q8_0,Q4_0,ROCMFP2,ROCMFP3,MXFP4,NVFP4,PQ2_0,PTQ1_0
echo "== vk tile A/B $(date -u +%T)" >> $L; for r in 1 2; do for b in lowbit lowbit_old; do echo "-- $b $r" >> $L; timeout 40 ./$b bench --backend vulkan --format $T10 --shape 16384x16384 --n 8 --json $OUT/vk-h200-2026-12-02-s11-lead-ab-$b-$r.json >> $L 2>&1; done; done
tail -c 11000 $L
