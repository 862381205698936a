/* Pairwise throughput of 512-bit instructions on this project's Zen 4 EPYC VM (session 11, t1):
 * eight independent instances of one instruction, or of two (16 per iteration), per loop
 * iteration; TSC ticks per iteration (TSC 2.6 GHz; the core ran at about 3.6 GHz, so 8
 * instructions at one per cycle read about 5.8). Two instructions that share no pipe take as long
 * as the slower alone; two that compete take the sum. Build: gcc -O2 -mavx512f zen4_pairs.c
 * (only the asm needs the ISA; the machine must have AVX-512 VNNI, VBMI and GFNI). */
#include <stdio.h>
#include <stdint.h>
#include <x86intrin.h>
#define N 20000000
#define R8(op) op(zmm0) op(zmm1) op(zmm2) op(zmm3) op(zmm4) op(zmm5) op(zmm6) op(zmm7)
#define R8b(op) op(zmm8) op(zmm9) op(zmm10) op(zmm11) op(zmm12) op(zmm13) op(zmm14) op(zmm15)
#define DP(r) "vpdpbusd %%zmm30, %%zmm31, %%" #r "\n"
#define SH(r) "vpsrlw $2, %%zmm31, %%" #r "\n"
#define AND(r) "vpandd %%zmm30, %%zmm31, %%" #r "\n"
#define PERM(r) "vpermi2b %%zmm30, %%zmm31, %%" #r "\n"
#define PERMB(r) "vpermb %%zmm30, %%zmm31, %%" #r "\n"
#define AFF(r) "vgf2p8affineqb $0, %%zmm30, %%zmm31, %%" #r "\n"
#define MSH(r) "vpmultishiftqb %%zmm30, %%zmm31, %%" #r "\n"
#define FMA(r) "vfmadd231ps %%zmm30, %%zmm31, %%" #r "\n"
#define CVT(r) "vcvtdq2ps %%zmm31, %%" #r "\n"
#define BLD(r) "vpblendmb %%zmm30, %%zmm31, %%" #r "%{%%k1%}\n"
#define MADD(r) "vpmaddubsw %%zmm30, %%zmm31, %%" #r "\n"
#define SHUF(r) "vpshufb %%zmm30, %%zmm31, %%" #r "\n"
#define ADDB(r) "vpaddb %%zmm30, %%zmm31, %%" #r "\n"
#define BC(r) "vbroadcastss %%xmm29, %%" #r "\n"
#define TERN(r) "vpternlogd $0x96, %%zmm30, %%zmm31, %%" #r "\n"
#define CMP(r) "vpcmpub $6, %%zmm30, %%zmm31, %%k2\n"
#define MOVM(r) "vpmovb2m %%zmm31, %%k2\n"
#define BENCH(name, body) { uint64_t t0=__rdtsc(); for (long i=0;i<N;i++){ __asm__ volatile(body ::: "zmm0","zmm1","zmm2","zmm3","zmm4","zmm5","zmm6","zmm7","zmm8","zmm9","zmm10","zmm11","zmm12","zmm13","zmm14","zmm15","k2","zmm29","rax"); } uint64_t t1=__rdtsc(); printf("%-12s %.3f tsc/iter\n", name, (double)(t1-t0)/N); }
int main(){
 __asm__ volatile("vpxord %%zmm30,%%zmm30,%%zmm30\n vpxord %%zmm31,%%zmm31,%%zmm31\n kxnorq %%k1,%%k1,%%k1\n":::"zmm30","zmm31","k1");
#define MPERM(r) "vmovdqa64 %%zmm29, %%" #r "\n vpermi2b %%zmm30, %%zmm31, %%" #r "%{%%k1%}\n"
#define MOV(r) "vmovdqa64 %%zmm29, %%" #r "\n"
#define KNOT(r) "knotq %%k1, %%k2\n"
#define KMOV(r) "kmovq %%rax, %%k2\n"
#define TEST(r) "vptestmb %%zmm30, %%zmm31, %%k2\n"
#define BLD1(r) "vpblendmb %%zmm30, %%zmm31, %%" #r "%{%%k1%}\n"
 BENCH("dp8", R8(DP));
 BENCH("sh8", R8(SH));
 BENCH("and8", R8(AND));
 BENCH("perm8", R8(PERM));
 BENCH("permb8", R8(PERMB));
 BENCH("aff8", R8(AFF));
 BENCH("msh8", R8(MSH));
 BENCH("fma8", R8(FMA));
 BENCH("cvt8", R8(CVT));
 BENCH("blend8", R8(BLD));
 BENCH("madd8", R8(MADD));
 BENCH("shuf8", R8(SHUF));
 BENCH("addb8", R8(ADDB));
 BENCH("bc8", R8(BC));
 BENCH("tern8", R8(TERN));
 BENCH("cmp8", R8(CMP));
 BENCH("movm8", R8(MOVM));
 BENCH("dp+sh", R8(DP) R8b(SH));
 BENCH("dp+and", R8(DP) R8b(AND));
 BENCH("dp+perm", R8(DP) R8b(PERM));
 BENCH("dp+aff", R8(DP) R8b(AFF));
 BENCH("dp+msh", R8(DP) R8b(MSH));
 BENCH("dp+fma", R8(DP) R8b(FMA));
 BENCH("dp+cvt", R8(DP) R8b(CVT));
 BENCH("dp+blend", R8(DP) R8b(BLD));
 BENCH("dp+shuf", R8(DP) R8b(SHUF));
 BENCH("sh+perm", R8(SH) R8b(PERM));
 BENCH("sh+and", R8(SH) R8b(AND));
 BENCH("sh+aff", R8(SH) R8b(AFF));
 BENCH("perm+and", R8(PERM) R8b(AND));
 BENCH("perm+aff", R8(PERM) R8b(AFF));
 BENCH("and+aff", R8(AND) R8b(AFF));
 BENCH("fma+sh", R8(FMA) R8b(SH));
 BENCH("cvt+sh", R8(CVT) R8b(SH));
 BENCH("cvt+perm", R8(CVT) R8b(PERM));
 BENCH("addb+and", R8(ADDB) R8b(AND));
 BENCH("dp+madd", R8(DP) R8b(MADD));
 BENCH("dp+tern", R8(DP) R8b(TERN));
 BENCH("dp+bc", R8(DP) R8b(BC));
 BENCH("sh+bc", R8(SH) R8b(BC));
 BENCH("and+bc", R8(AND) R8b(BC));
 BENCH("dp+movm", R8(DP) R8b(MOVM));
 BENCH("sh+movm", R8(SH) R8b(MOVM));
 BENCH("dp+cmp", R8(DP) R8b(CMP));
 BENCH("sh+cmp", R8(SH) R8b(CMP));
 BENCH("mperm8", R8(MPERM));
 BENCH("mov8", R8(MOV));
 BENCH("perm8", R8(PERM));
 BENCH("perm+blend", R8(PERM) R8b(BLD));
 BENCH("dp+sh+and", R8(DP) R8b(SH) R8(AND));
 BENCH("dp+sh+and2", R8(DP) R8b(SH) R8(AND) R8b(AND));
 BENCH("dp+perm+and", R8(DP) R8b(PERM) R8(AND));
 BENCH("dp+sh+perm", R8(DP) R8b(SH) R8(PERM));
 BENCH("dp+aff+sh", R8(DP) R8b(AFF) R8(SH));
 BENCH("knot8", R8(KNOT));
 BENCH("dp+knot", R8(DP) R8b(KNOT));
 BENCH("kmov8", R8(KMOV));
 BENCH("dp+kmov", R8(DP) R8b(KMOV));
 BENCH("test8", R8(TEST));
 BENCH("dp+test", R8(DP) R8b(TEST));
 BENCH("sh+test", R8(SH) R8b(TEST));
 BENCH("perm+movm", R8(PERM) R8b(MOVM));
 BENCH("dp+sh+bld", R8(DP) R8b(SH) R8(BLD1));
 return 0;
}
