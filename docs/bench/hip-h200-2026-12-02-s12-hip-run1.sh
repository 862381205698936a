#!/bin/bash
# session 12 hip, run 1: n = 1 A/B of the staged kernels (lb_mv1s, codes 33..38) against the
# old binary (main's HEAD), alternated; then the device tests of the new build.
cd "$(dirname "$0")"
exec > >(tee -a $OUT/run1.log) 2>&1
date -u
for f in *.xz; do xz -dkf "$f"; done; chmod +x lowbit_old lowbit_new vs_reference
export LOWBIT_HIP_CACHE_DIR=/tmp/hipcache
S=16384x16384
F=ROCMFP2,PQ2_0,TQ2_0,NVFP4,MXFP4,ROCMFP3,PTQ1_0,HFP4G32
echo "== old A"; ./lowbit_old bench --backend hip --format $F --shape $S --n 1 --json $OUT/n1-old-a.json | grep -v "^wrote"
date -u
echo "== new sweep (rows per warp 1,2,4 x codes 33,34,36,38; a point whose ring does not fit runs the old default)"
LOWBIT_HIP_BENCH_ROWS_PER_WARP=1,2,4 LOWBIT_HIP_BENCH_UNITS=33,34,36,38 timeout 200 ./lowbit_new bench --backend hip --format $F --shape $S --n 1 --json $OUT/n1-new-sweep.json | grep -v "^wrote"
date -u
echo "== old B"; ./lowbit_old bench --backend hip --format $F --shape $S --n 1 --json $OUT/n1-old-b.json | grep -v "^wrote"
date -u
LOWBIT_REQUIRE_HIP=1 timeout 170 ./vs_reference --test-threads 1 --skip host_emulation 2>&1 | tail -14
date -u
