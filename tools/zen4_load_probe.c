/* Zen 4 load/issue probe (session 11, h4; docs/BENCHMARKS.md "Session 11 (h4)"): zmm / ymm /
   broadcast / scalar loads from L1 alone and beside vdpbf16ps, and the 4-row HFP4 bf16 block
   mix with and without its table loads, cycles per iteration from a 1-cycle add chain.
   gcc -O2 -mavx512f -mavx512bw -mavx512vbmi -mavx512bf16 tools/zen4_load_probe.c -o /tmp/p && /work/quiet.sh /tmp/p */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 10000000L
#define CL "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","xmm16","xmm17","xmm18","xmm19","xmm20","xmm21","xmm22","xmm23","xmm24","xmm25","rax","rdx","rcx"
static double ghz;
#define BODYP(name, asmtext, units) \
static void name(char*p){ double t0=now(); for(long i=0;i<N;i++){ __asm__ volatile(asmtext :: "r"(p) : CL); } double t=now()-t0; printf("%-34s %.2f cyc/iter\n", #name, t/N*ghz*1e9);}
#define B(r) "vdpbf16ps %%zmm20, %%zmm21, %%zmm" #r "\n"
#define B8 B(0)B(1)B(2)B(3)B(4)B(5)B(6)B(7)
#define LZ(o,r) "vmovdqu64 " #o "(%0), %%zmm" #r "\n"
#define LZU(o,r) "vmovdqu64 " #o "+36(%0), %%zmm" #r "\n"
#define LY(o,r) "vmovdqu " #o "(%0), %%ymm" #r "\n"
#define BC(o,r) "vbroadcasti64x4 " #o "(%0), %%zmm" #r "\n"
#define PWM(o,r) "vpermw " #o "(%0), %%zmm21, %%zmm" #r "\n"
#define SB(o) "movzbl " #o "(%0), %%eax\n"
#define W(r) "vpermw %%zmm20, %%zmm21, %%zmm" #r "\n"
BODYP(dots8, B8, 1)
BODYP(lz8, LZ(0,8)LZ(64,9)LZ(128,10)LZ(192,11)LZ(256,12)LZ(320,13)LZ(384,14)LZ(448,15), 1)
BODYP(lzu8, LZU(0,8)LZU(64,9)LZU(128,10)LZU(192,11)LZU(256,12)LZU(320,13)LZU(384,14)LZU(448,15), 1)
BODYP(ly8, LY(0,8)LY(64,9)LY(128,10)LY(192,11)LY(256,12)LY(320,13)LY(384,14)LY(448,15), 1)
BODYP(bc8, BC(0,8)BC(64,9)BC(128,10)BC(192,11)BC(256,12)BC(320,13)BC(384,14)BC(448,15), 1)
BODYP(pwm8, PWM(0,8)PWM(64,9)PWM(128,10)PWM(192,11)PWM(256,12)PWM(320,13)PWM(384,14)PWM(448,15), 1)
BODYP(sb8, SB(0)SB(64)SB(128)SB(192)SB(256)SB(320)SB(384)SB(448), 1)
/* one row-block group for 4 rows (n=1 kernel): 8 dots, 4 pwm (table), 2 x loads, 1 q load (unaligned), 4 scalar bytes */
BODYP(blk_cur, B8 PWM(0,16)PWM(64,17)PWM(128,18)PWM(192,19) LZ(512,22)LZ(576,23) LZU(640,24) SB(1000)SB(1001)SB(1002)SB(1003), 1)
BODYP(blk_noscal, B8 PWM(0,16)PWM(64,17)PWM(128,18)PWM(192,19) LZ(512,22)LZ(576,23) LZU(640,24), 1)
BODYP(blk_bc, B8 BC(0,16)BC(64,17)BC(128,18)BC(192,19) W(16)W(17)W(18)W(19) LZ(512,22)LZ(576,23) LZU(640,24) SB(1000)SB(1001)SB(1002)SB(1003), 1)
BODYP(blk_notbl, B8 W(16)W(17)W(18)W(19) LZ(512,22)LZ(576,23) LZU(640,24) SB(1000)SB(1001)SB(1002)SB(1003), 1)
BODYP(blk_notbl_nox, B8 W(16)W(17)W(18)W(19) LZU(640,24) SB(1000)SB(1001)SB(1002)SB(1003), 1)
/* 8 rows sharing x: per 8 row-blocks: 16 dots, 8 pwm, 2 x, 2 q, 8 scal */
BODYP(blk8_cur, B8 B8 PWM(0,16)PWM(64,17)PWM(128,18)PWM(192,19)PWM(256,16)PWM(320,17)PWM(384,18)PWM(448,19) LZ(512,22)LZ(576,23) LZU(640,24) LZU(704,25) SB(1000)SB(1001)SB(1002)SB(1003)SB(1000)SB(1001)SB(1002)SB(1003), 1)
int main(void){
  double t0=now(); for(long i=0;i<N;i++){ __asm__ volatile("add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n":::"rax"); }
  double t=now()-t0; ghz = 8.0*N/t/1e9; printf("clock ~ %.2f GHz\n", ghz);
  char*p=aligned_alloc(64,4096); for(int i=0;i<4096;i++)p[i]=(char)(i*7);
  for(int r=0;r<2;r++){dots8(p);lz8(p);lzu8(p);ly8(p);bc8(p);pwm8(p);sb8(p);blk_cur(p);blk_noscal(p);blk_bc(p);blk_notbl(p);blk_notbl_nox(p);blk8_cur(p);}
  return 0;}
