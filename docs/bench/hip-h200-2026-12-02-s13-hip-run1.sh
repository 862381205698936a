#!/bin/bash
# session 13 hip, run 1: activations staged with the weights (codes 42/43/44), register caps
# (LB_MV1_MINB = 5, 6) on the defaults, the staged kernels and the P-deep register rings
# (codes 4: weights + activations 4 deep), against the old binary, alternated.
cd "$(dirname "$0")"
exec > >(tee -a $OUT/run1.log) 2>&1
export PATH=$PATH:/usr/local/cuda/bin
date -u
for f in *.xz; do xz -dkf "$f"; done; chmod +x lowbit_old lowbit_new
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
export LOWBIT_HIP_CACHE_DIR=/tmp/hipcache
S=16384x16384
F=ROCMFP2,MXFP4,PQ2_0,TQ2_0
# warm the code-object cache: every (binary, defines, stem) compiled in parallel on a small shape
for fm in ROCMFP2 MXFP4 PQ2_0 TQ2_0; do
  ./lowbit_old bench --backend hip --format $fm --shape 256x256 --n 1 >/dev/null 2>&1 &
  for d in "" LB_MV1_MINB=5 LB_MV1_MINB=6; do
    LOWBIT_HIP_DEFINES=$d ./lowbit_new bench --backend hip --format $fm --shape 256x256 --n 1 >/dev/null 2>&1 &
  done
done
wait
date -u
echo "== old A"; timeout 60 ./lowbit_old bench --backend hip --format $F --shape $S --n 1 --json $OUT/old-a.json | grep -v "^wrote"
echo "== new, no cap: rows 1,2,4 x codes default,42,43"
LOWBIT_HIP_BENCH_ROWS_PER_WARP=1,2,4 LOWBIT_HIP_BENCH_UNITS=0,42,43 timeout 90 ./lowbit_new bench --backend hip --format $F --shape $S --n 1 --json $OUT/new-nocap.json | grep -v "^wrote"
date -u
for b in 5 6; do
  echo "== new, LB_MV1_MINB=$b: rows 2,4 x codes default,4,33,42,43"
  LOWBIT_HIP_DEFINES=LB_MV1_MINB=$b LOWBIT_HIP_BENCH_ROWS_PER_WARP=2,4 LOWBIT_HIP_BENCH_UNITS=0,4,33,42,43 timeout 90 ./lowbit_new bench --backend hip --format $F --shape $S --n 1 --json $OUT/new-minb$b.json | grep -v "^wrote"
  date -u
done
echo "== old B"; timeout 60 ./lowbit_old bench --backend hip --format $F --shape $S --n 1 --json $OUT/old-b.json | grep -v "^wrote"
echo "== new defaults"; timeout 60 ./lowbit_new bench --backend hip --format $F --shape $S --n 1 --json $OUT/new-dflt.json | grep -v "^wrote"
date -u
for v in "rocmfp2:ROCMFP2:2:43:" "pq2:PQ2_0:2:43:" "rocmfp2:ROCMFP2:2:43:LB_MV1_MINB=5"; do
  IFS=: read st fm r u d <<<"$v"
  echo "== ncu lb_mv_${st}_1_r${r}_u$u defines '$d'"
  LOWBIT_HIP_DEFINES=$d LOWBIT_HIP_ROWS_PER_WARP=$r LOWBIT_HIP_UNITS=$u timeout 40 ncu --clock-control none -k regex:lb_mv_${st}_1_r${r}_u$u --launch-skip 20 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats \
    ./lowbit_new bench --backend hip --format $fm --shape $S --n 1 > $OUT/ncu-${st}-r${r}_u$u$d.txt 2>&1
  grep -E "Registers Per|Duration|DRAM Through|Theoretical Occ|Achieved Occ|Issued Warp|Warp Cycles Per Issued|Static Shared" $OUT/ncu-${st}-r${r}_u$u$d.txt
done
date -u
