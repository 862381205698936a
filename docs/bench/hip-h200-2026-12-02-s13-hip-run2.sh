#!/bin/bash
# session 13 hip, run 2 (run 1 hung in its cache warm-up: a bare `wait` also waits for the
# tee process substitution). Activations staged with the weights (codes 42/43), a register
# cap (LB_MV1_MINB=5) on the default, staged and register-ring (code 4) kernels; old and new
# alternated (old A, new, old B, new); then the device tests.
cd "$(dirname "$0")"
exec > >(tee -a $OUT/run2.log) 2>&1
export PATH=$PATH:/usr/local/cuda/bin
date -u
for f in *.xz; do xz -dkf "$f"; done; chmod +x lowbit_old lowbit_new vs_reference
export LOWBIT_HIP_CACHE_DIR=/tmp/hipcache
S=16384x16384
F=ROCMFP2,MXFP4,PQ2_0,TQ2_0
pids=""
for fm in ROCMFP2 MXFP4 PQ2_0 TQ2_0; do
  timeout 60 ./lowbit_old bench --backend hip --format $fm --shape 256x256 --n 1 >/dev/null 2>&1 & pids="$pids $!"
  LOWBIT_HIP_DEFINES=LB_MV1_MINB=5 timeout 60 ./lowbit_new bench --backend hip --format $fm --shape 256x256 --n 1 >/dev/null 2>&1 & pids="$pids $!"
done
for fm in Q8_0 Q4_0 Q4_1 Q4_K Q6_K NVFP4 ROCMFP2 MXFP4 PQ2_0 TQ2_0 ROCMFP3 HFP4G32 MFP4G32P; do
  timeout 60 ./lowbit_new bench --backend hip --format $fm --shape 256x256 --n 1 >/dev/null 2>&1 & pids="$pids $!"
done
wait $pids
date -u
echo "== old A"; timeout 40 ./lowbit_old bench --backend hip --format $F --shape $S --n 1 --json $OUT/old-a.json | grep -v "^wrote"
echo "== new, no cap: rows 2,4 x codes 42,43"
LOWBIT_HIP_BENCH_ROWS_PER_WARP=2,4 LOWBIT_HIP_BENCH_UNITS=42,43 timeout 45 ./lowbit_new bench --backend hip --format $F --shape $S --n 1 --json $OUT/new-nocap.json | grep -v "^wrote"
echo "== old B"; timeout 40 ./lowbit_old bench --backend hip --format $F --shape $S --n 1 --json $OUT/old-b.json | grep -v "^wrote"
echo "== new, LB_MV1_MINB=5: rows 2 x codes default,43"
LOWBIT_HIP_DEFINES=LB_MV1_MINB=5 LOWBIT_HIP_BENCH_ROWS_PER_WARP=2 LOWBIT_HIP_BENCH_UNITS=0,43 timeout 35 ./lowbit_new bench --backend hip --format $F --shape $S --n 1 --json $OUT/new-minb5.json | grep -v "^wrote"
date -u
LOWBIT_REQUIRE_HIP=1 timeout 70 ./vs_reference --test-threads 1 --skip host_emulation 2>&1 | tail -8
date -u
