#!/bin/bash
# session 11 hip, run 2: device tests (candidate defines), A/B of the n = 1 and n = 8 forms
cd "$(dirname "$0")"
exec > >(tee -a $OUT/run2.log) 2>&1
date -u
for f in *.xz; do xz -dkf "$f"; done; chmod +x lowbit_base lowbit_new vs_reference
export LOWBIT_HIP_CACHE_DIR=/tmp/hipcache
S=16384x16384
N1=Q4_0,NVFP4,MXFP4,ROCMFP2,ROCMFP3,PQ2_0,TQ2_0,PTQ1_0
N8=Q4_0,NVFP4,MXFP4,ROCMFP2,ROCMFP3,PQ2_0,TQ2_0
export LOWBIT_HIP_DEFINES=LB_LD_W=1,LB_MMA_AHEAD=3
LOWBIT_REQUIRE_HIP=1 timeout 150 ./vs_reference --test-threads 1 2>&1 | tail -12
date -u
for v in cg3:LB_LD_W=1,LB_MMA_AHEAD=3 dflt:; do
  export LOWBIT_HIP_DEFINES=${v#*:}; t=${v%%:*}
  echo "== variant $t defines '$LOWBIT_HIP_DEFINES'"
  LOWBIT_HIP_BENCH_UNITS=0,22,24 ./lowbit_new bench --backend hip --format $N1 --shape $S --n 1 --json $OUT/n1-$t.json | grep -v "^wrote"
  ./lowbit_new bench --backend hip --format $N8 --shape $S --n 8 --json $OUT/n8-$t.json | grep -v "^wrote"
  date -u
done
export LOWBIT_HIP_DEFINES=
echo "== old binary (session 10 kernels)"
./lowbit_base bench --backend hip --format PQ2_0,TQ2_0,PTQ1_0,ROCMFP2 --shape $S --n 1 --json $OUT/n1-old.json
date -u
