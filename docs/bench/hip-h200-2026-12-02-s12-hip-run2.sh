#!/bin/bash
# session 12 hip, run 2: the staged kernels with the activations one step ahead
# (LB_STAGE_ACT=1) against the old binary, alternated; an ncu look at two staged kernels; the
# device tests of this build with LB_STAGE_ACT=1.
cd "$(dirname "$0")"
exec > >(tee -a $OUT/run2.log) 2>&1
export PATH=$PATH:/usr/local/cuda/bin
date -u
for f in *.xz; do xz -dkf "$f"; done; chmod +x lowbit_old lowbit_new vs_reference
export LOWBIT_HIP_CACHE_DIR=/tmp/hipcache
S=16384x16384
F=ROCMFP2,PQ2_0,TQ2_0,NVFP4,MXFP4
echo "== old A"; ./lowbit_old bench --backend hip --format $F --shape $S --n 1 --json $OUT/n1-old-a.json | grep -v "^wrote"
echo "== new, LB_STAGE_ACT=1, rows per warp 2,4 x codes 33,34"
LOWBIT_HIP_DEFINES=LB_STAGE_ACT=1 LOWBIT_HIP_BENCH_ROWS_PER_WARP=2,4 LOWBIT_HIP_BENCH_UNITS=33,34 timeout 100 ./lowbit_new bench --backend hip --format $F --shape $S --n 1 --json $OUT/n1-new-act1.json | grep -v "^wrote"
echo "== old B"; ./lowbit_old bench --backend hip --format $F --shape $S --n 1 --json $OUT/n1-old-b.json | grep -v "^wrote"
date -u
for v in "r2_u34:2:34:" "r4_u33:4:33:LB_STAGE_ACT=1"; do
  IFS=: read k r u d <<<"$v"
  echo "== ncu lb_mv_rocmfp2_1_$k defines '$d'"
  LOWBIT_HIP_DEFINES=$d LOWBIT_HIP_ROWS_PER_WARP=$r LOWBIT_HIP_UNITS=$u timeout 60 ncu --clock-control none -k regex:lb_mv_rocmfp2_1_$k --launch-skip 20 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats \
    ./lowbit_new bench --backend hip --format ROCMFP2 --shape $S --n 1 > $OUT/ncu-$k.txt 2>&1
  grep -E "Registers Per|Duration|DRAM Through|Theoretical Occ|Achieved Occ|Issued Warp|Block Limit (Reg|Shared)|Warp Cycles Per Issued|Static Shared" $OUT/ncu-$k.txt
done
date -u
LOWBIT_HIP_DEFINES=LB_STAGE_ACT=1 LOWBIT_REQUIRE_HIP=1 timeout 120 ./vs_reference --test-threads 1 --skip host_emulation 2>&1 | tail -10
date -u
