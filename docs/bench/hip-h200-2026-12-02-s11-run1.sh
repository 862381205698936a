#!/bin/bash
# session 11 hip, run 1: baseline, ncu source-level profiles, n = 8 sweep
cd "$(dirname "$0")"
L=$OUT/run1.log
exec > >(tee -a $L) 2>&1
date -u
for f in *.xz; do xz -dk "$f"; done; chmod +x lowbit_base
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv
export LOWBIT_HIP_CACHE_DIR=/tmp/hipcache
B=./lowbit_base
S=16384x16384
# ncu first: ROCmFP2 n=1 and PQ2_0 n=1 (SASS-level stall sampling)
for k in rocmfp2_1_:ROCMFP2:1 pq2_1_:PQ2_0:1 mxfp4_1_:MXFP4:1 q4_0_8_mma:Q4_0:8; do
  stem=${k%%:*}; r=${k#*:}; fmt=${r%%:*}; n=${r##*:}
  timeout 150 ncu --clock-control none -k regex:lb_mv_${stem} --launch-skip 20 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    -o /tmp/p_$stem $B bench --backend hip --format $fmt --shape $S --n $n > /tmp/ncu_$stem.log 2>&1
  tail -5 /tmp/ncu_$stem.log
  ncu --import /tmp/p_$stem.ncu-rep --page details > $OUT/ncu-$stem-details.txt 2>&1
  ncu --import /tmp/p_$stem.ncu-rep --page source --print-source sass --csv > /tmp/sass_$stem.csv 2>&1
  wc -l /tmp/sass_$stem.csv
done
tar cJf $OUT/ncu-sass.tar.xz -C /tmp sass_rocmfp2_1_.csv sass_pq2_1_.csv sass_mxfp4_1_.csv sass_q4_0_8_mma.csv
date -u
$B bench --backend hip --format Q8_0,Q4_0,Q4_1,Q6_K,Q4_K,NVFP4,MXFP4,ROCMFP2,ROCMFP3,PQ2_0,TQ2_0,PTQ1_0,HFP4G32 --shape $S --n 1,8 --json $OUT/base.json
date -u
LOWBIT_HIP_BENCH_ROWS_PER_WARP=1,2,4,32,17,18,16 $B bench --backend hip --format Q4_0,Q4_K,ROCMFP2,HFP4G32,MXFP4,NVFP4 --shape $S --n 8 --json $OUT/n8sweep.json
date -u
