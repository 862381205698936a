/* Zen 4 probe for the Q4_0 one-block-per-lane decode (docs/BENCHMARKS.md, "Session 10 (n4)"):
 * register-only throughput of 16 independent vpdpbusd alone and with 8 of each decode
 * instruction beside them (vpunpckldq, vinserti32x4 from memory, vpsrlw, vpandq, vpermb,
 * masked vbroadcasti32x4, zmm loads), cycles per iteration from a 1-cycle scalar add chain,
 * best of 5. If an instruction issued on the vpdpbusd pipes, "dp16_X8" would exceed "dp16".
 *
 * Build and run: gcc -O2 -mavx512f tools/zen4_shuffle_probe.c -o /tmp/sprobe && /work/quiet.sh /tmp/sprobe
 */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 5000000L
#define CL "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","xmm16","xmm17","xmm18","xmm19","xmm20","xmm21","xmm22","xmm23","xmm24","xmm25"
static double ghz; static char *p;
#define BODY(name, asmtext) \
static void name(void){ double best=1e9; for(int r=0;r<5;r++){double t0=now(); for(long i=0;i<N;i++){ __asm__ volatile(asmtext :: "r"(p): CL); } double t=now()-t0; if(t<best)best=t;} printf("%-20s %.2f cyc/iter\n", #name, best/N*ghz*1e9);}
#define D(r) "vpdpbusd %%zmm20, %%zmm21, %%zmm" #r "\n"
#define D16 D(0)D(1)D(2)D(3)D(4)D(5)D(6)D(7)D(8)D(9)D(10)D(11)D(12)D(13)D(14)D(15)
#define U(r) "vpunpckldq %%zmm20, %%zmm21, %%zmm" #r "\n"
#define I(r) "vinserti32x4 $1, 16(%0), %%zmm21, %%zmm" #r "\n"
#define SR(r) "vpsrlw $4, %%zmm21, %%zmm" #r "\n"
#define AN(r) "vpandq %%zmm20, %%zmm21, %%zmm" #r "\n"
#define P2(r) "vmovdqa64 %%zmm22, %%zmm" #r "\n vpermt2b %%zmm20, %%zmm21, %%zmm" #r "\n"
#define PB(r) "vpermb %%zmm20, %%zmm21, %%zmm" #r "\n"
#define BM(r) "vbroadcasti32x4 32(%0), %%zmm" #r "%{%%k1%}\n"
#define L(r) "vmovdqu64 64(%0), %%zmm" #r "\n"
#define X8(M) M(16)M(17)M(18)M(19)M(22)M(23)M(24)M(25)
BODY(dp16, D16)
BODY(unpck8, X8(U))
BODY(dp16_unpck8, D16 X8(U))
BODY(ins8, X8(I))
BODY(dp16_ins8, D16 X8(I))
BODY(dp16_srl8, D16 X8(SR))
BODY(dp16_and8, D16 X8(AN))
BODY(dp16_permb8, D16 X8(PB))
BODY(dp16_bcastm8, D16 X8(BM))
BODY(dp16_load8, D16 X8(L))
BODY(dp16_unpck16, D16 X8(U) X8(U))
int main(void){
  p=aligned_alloc(64,4096); for(int i=0;i<4096;i++)p[i]=(char)(i*7);
  __asm__ volatile("mov $0xf0, %%eax\n kmovw %%eax, %%k1":::"rax");
  double t0=now(); for(long i=0;i<N*4;i++){ __asm__ volatile("add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n":::"rax"); }
  double t=now()-t0; ghz = 8.0*N*4/t/1e9; printf("clock ~ %.2f GHz\n", ghz);
  dp16();unpck8();dp16_unpck8();ins8();dp16_ins8();dp16_srl8();dp16_and8();dp16_permb8();dp16_bcastm8();dp16_load8();dp16_unpck16();
  return 0;}
