#!/bin/bash
# tools/hip_codebook_ab.sh: the session-10 HIP codebook A/B on an NVIDIA device (docs/BENCHMARKS.md,
# "Session 10 (hip)"): first-use compile time, n = 1 benches of the 2-bit formats and ROCmFP3
# for several LOWBIT_HIP_DEFINES variants (each with its own code-object cache), the device
# tests, and SASS opcode counts of the default n = 1 kernels from each cache (cuobjdump).
# Usage (on the device, CUDA toolkit on PATH): tools/hip_codebook_ab.sh DIR OUTDIR, DIR holding
# the release `lowbit` (runtime, feature hip) and the `vs_reference` test binary.
set -u
root=$(cd "$(dirname "$0")/.." && pwd); cd "$1"; OUT=$2; mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin; L=$OUT/log.txt
F=ROCMFP2,PQ2_0,TQ2_0,PTQ1_0,ROCMFP3; S=16384x16384
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >> $L 2>&1
echo "== first use, empty cache (base + rocmfp2 modules)" >> $L
/usr/bin/time -f "first-use wall %e s" env LOWBIT_HIP_CACHE_DIR=/tmp/c-dflt ./lowbit bench --backend hip --format ROCMFP2 --shape 4096x4096 --n 1 >> $L 2>&1
/usr/bin/time -f "warm-cache wall %e s" env LOWBIT_HIP_CACHE_DIR=/tmp/c-dflt ./lowbit bench --backend hip --format ROCMFP2 --shape 4096x4096 --n 1 >> $L 2>&1
b() { # name cache defines extra-env
  echo "== bench $1 ($3)" >> $L
  env LOWBIT_HIP_CACHE_DIR=$2 LOWBIT_HIP_DEFINES="$3" $4 timeout 120 ./lowbit bench --backend hip --format $F --shape $S --n 1 --json $OUT/bench-$1.json >> $L 2>&1
}
# Session 10 ran new = (SEL 1, TAB 2), old, sel, tab1, new2, old2 (the LUT8 table followed LB_CB_TAB
# then); sel2 and tab2 are the forms left to measure. Defaults now: SEL 0, CB_TAB 0, LUT8_TAB 2.
SW="LOWBIT_HIP_BENCH_ROWS_PER_WARP=0,4 LOWBIT_HIP_BENCH_UNITS=0,12,14,2"
V="old:LB_CB_SEL=0,LB_CB_TAB=0,LB_LUT8_TAB=0 dflt:LB_CB_SEL=0 sel2:LB_CB_SEL=2,LB_CB_TAB=2 tab2:LB_CB_SEL=0,LB_CB_TAB=2 new:LB_CB_SEL=1,LB_CB_TAB=2"
for v in $V; do b ${v%%:*} /tmp/c-${v%%:*} "${v#*:}" "$SW"; done
for v in $V; do b ${v%%:*}-2 /tmp/c-${v%%:*} "${v#*:}" ""; done
echo "== tests" >> $L
LOWBIT_HIP_CACHE_DIR=/tmp/c-dflt LOWBIT_REQUIRE_HIP=1 timeout 200 ./vs_reference --test-threads 1 >> $L 2>&1
echo "== sass" >> $L
mkdir -p /tmp/s; for v in $V; do c=${v%%:*}; for f in /tmp/c-$c/*.co; do
  if head -c 200 $f | grep -q "\.version"; then ptxas -arch=sm_90 -o /tmp/x.cubin $f && f=/tmp/x.cubin; fi
  cuobjdump -sass $f > /tmp/x.sass 2>/dev/null
  for k in rocmfp2 pq2 tq2_0 rocmfp3; do grep -q "lb_mv_${k}_1_r2_u14" /tmp/x.sass && cp /tmp/x.sass /tmp/s/c$c-$k.sass; done
done; done
for v in $V; do c=${v%%:*}; for k in "rocmfp2 r2_u14" "rocmfp2 r4_u14" "pq2 r2_u12" "pq2 r4_u14" "tq2_0 r2_u12" "rocmfp3 r1_u14"; do set -- $k
  echo "c$c" >> $L; python3 "$root/tools/sass_opcounts.py" /tmp/s/c$c-$1.sass lb_mv_$1_1_$2 >> $L 2>&1; done; done
(cd /tmp/s && tar cJf $OUT/sass.tar.xz *.sass)
# At most 8 files come back from the device: the JSONs go in one archive.
(cd "$OUT" && tar cJf bench.tar.xz bench-*.json && rm -f bench-*.json)
