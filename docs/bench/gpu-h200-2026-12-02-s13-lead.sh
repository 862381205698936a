#!/bin/bash
# lead, session 13: the merged tree on the device machine. lowbit-cpu's tests on its host CPU
# (AVX-512; this session's VM has none); on that CPU, one thread: PQ2_0/TQ2_0 before session 12's
# AVX-512 lane-order repack (lowbit_pq2old) and after, alternated, and Ternary68 per ISA; the
# Vulkan sweep and tests; the HIP tests.
export PATH=$PATH:/usr/local/cuda/bin
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
L=$OUT/lead.log; cd .lead-dev; xz -d -T4 *.xz; chmod +x lowbit* vs_reference vk_matmul cpu_*
{ date -u +%T; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; grep -m1 "model name" /proc/cpuinfo; grep -o 'avx512[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo; nproc; } > $L 2>&1
echo "== cpu tests $(date -u +%T)" >> $L
for t in cpu_lib cpu_matmul cpu_prefill cpu_split cpu_hfp4_bf16; do echo "-- $t" >> $L; RAYON_NUM_THREADS=8 timeout 70 ./$t --test-threads 8 2>&1 | grep -E "test result|FAILED|panicked|failed" >> $L; echo "rc ${PIPESTATUS[0]}" >> $L; done
echo "== cpu bench (one thread) $(date -u +%T)" >> $L
for i in 1 2; do for b in lowbit_pq2old lowbit; do
  echo "-- $b round $i" >> $L
  timeout 40 ./$b bench --format PQ2_0,TQ2_0 --shape 4096x14336,14336x4096 --n 1,4 --threads 1 --isa avx512-vnni --rounds 2 --json $OUT/cpu-spr-s13-lead-pq2-$b-$i.json 2>&1 | grep -E "PQ2_0|TQ2_0|ceiling|GB/s" >> $L
done; done
# Session 13's AVX2 K-quant body change reaches the AVX-512 Q4_K/Q6_K forms too: before
# (lowbit_base, 18e16ff) and after, alternated; NVFP4 (unchanged) as a same-code control.
for i in 1 2; do for b in lowbit_base lowbit; do
  echo "-- $b round $i" >> $L
  timeout 40 ./$b bench --format Q4_K,Q6_K,NVFP4 --shape 4096x14336,14336x4096 --n 1,4 --threads 1 --isa avx512-vnni --rounds 2 --json $OUT/cpu-spr-s13-lead-kq-$b-$i.json 2>&1 | grep -E "Q4_K|Q6_K|NVFP4" >> $L
done; done
for isa in avx2 avx512 avx512-vnni; do
  timeout 40 ./lowbit bench --format TERNARY68 --shape 4096x14336,14336x4096 --n 1,4 --threads 1 --isa $isa --rounds 2 --json $OUT/cpu-spr-s13-lead-t68-$isa.json 2>&1 | grep -E "TERNARY68" | sed "s/^/$isa /" >> $L
done
ALL=Q8_0,Q4_0,Q4_1,Q6_K,Q4_K,NVFP4,MXFP4,ROCMFP2,ROCMFP3,PQ2_0,TQ2_0,PTQ1_0,HFP4G32
echo "== vk sweep $(date -u +%T)" >> $L; timeout 100 ./lowbit bench --backend vulkan --format $ALL --shape 16384x16384 --n 1,8 --json $OUT/vk-h200-2026-12-02-s13-lead.json >> $L 2>&1; echo "rc $?" >> $L
echo "== vk tests $(date -u +%T)" >> $L; LOWBIT_REQUIRE_VULKAN=1 timeout 120 ./vk_matmul >> $L 2>&1; echo "rc $? $(date -u +%T)" >> $L
echo "== hip tests $(date -u +%T)" >> $L; LOWBIT_HIP_CACHE_DIR=/tmp/hc LOWBIT_REQUIRE_HIP=1 timeout 110 ./vs_reference --skip host_emulation >> $L 2>&1; echo "rc $? $(date -u +%T)" >> $L
tail -c 11000 $L
