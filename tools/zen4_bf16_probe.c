/* Zen 4 vdpbf16ps / vpermw issue probe (session 11, h4): throughput and latency of vdpbf16ps
   zmm, vpermw/vpermb/vpermt2w/vpsrlw alone and beside it. Build as tools/zen4_load_probe.c. */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 10000000L
#define CL "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","xmm16","xmm17","xmm18","xmm19","xmm20","xmm21","xmm22","xmm23","xmm24","xmm25"
static double ghz;
#define BODY(name, asmtext, ninstr) \
static void name(void){ double t0=now(); for(long i=0;i<N;i++){ __asm__ volatile(asmtext ::: CL); } double t=now()-t0; printf("%-34s %.2f cyc/iter  %.3f cyc/instr\n", #name, t/N*ghz*1e9, t/N*1e9*ghz/ninstr);}
#define B(r) "vdpbf16ps %%zmm20, %%zmm21, %%zmm" #r "\n"
#define F(r) "vfmadd231ps %%zmm20, %%zmm21, %%zmm" #r "\n"
#define W(r) "vpermw %%zmm20, %%zmm21, %%zmm" #r "\n"
#define Wy(r) "vpermw %%ymm20, %%ymm21, %%ymm" #r "\n"
#define PB(r) "vpermb %%zmm20, %%zmm21, %%zmm" #r "\n"
#define PS(r) "vpermps %%zmm20, %%zmm21, %%zmm" #r "\n"
#define SH(r) "vpsrlw $4, %%zmm20, %%zmm" #r "\n"
#define T2(r) "vpermt2w %%zmm20, %%zmm21, %%zmm" #r "\n"
#define B16 B(0)B(1)B(2)B(3)B(4)B(5)B(6)B(7)B(8)B(9)B(10)B(11)B(12)B(13)B(14)B(15)
#define B8 B(0)B(1)B(2)B(3)B(4)B(5)B(6)B(7)
#define BL8 B(0)B(0)B(1)B(1)B(2)B(2)B(3)B(3)
BODY(bf16x16, B16, 16)
BODY(bf16_chain1, B(0)B(0)B(0)B(0)B(0)B(0)B(0)B(0), 8)
BODY(bf16_4chains, B(0)B(1)B(2)B(3)B(0)B(1)B(2)B(3)B(0)B(1)B(2)B(3)B(0)B(1)B(2)B(3), 16)
BODY(bf16_8chains, B16 B16, 32)
BODY(fma16, F(0)F(1)F(2)F(3)F(4)F(5)F(6)F(7)F(8)F(9)F(10)F(11)F(12)F(13)F(14)F(15), 16)
BODY(permw8, W(16)W(17)W(18)W(19)W(22)W(23)W(24)W(25), 8)
BODY(permw8y, Wy(16)Wy(17)Wy(18)Wy(19)Wy(22)Wy(23)Wy(24)Wy(25), 8)
BODY(permb8, PB(16)PB(17)PB(18)PB(19)PB(22)PB(23)PB(24)PB(25), 8)
BODY(permt2w8, T2(16)T2(17)T2(18)T2(19)T2(22)T2(23)T2(24)T2(25), 8)
BODY(srlw8, SH(16)SH(17)SH(18)SH(19)SH(22)SH(23)SH(24)SH(25), 8)
BODY(bf8_permw4, B8 W(16)W(17)W(18)W(19), 12)
BODY(bf8_permb4, B8 PB(16)PB(17)PB(18)PB(19), 12)
BODY(bf8_permps4, B8 PS(16)PS(17)PS(18)PS(19), 12)
BODY(bf8_permw4_srl3, B8 W(16)W(17)W(18)W(19) SH(22)SH(23)SH(24), 15)
BODY(bf16_permw8_srl6, B16 W(16)W(17)W(18)W(19) W(16)W(17)W(18)W(19) SH(22)SH(23)SH(24)SH(22)SH(23)SH(24), 30)
int main(void){
  double t0=now(); for(long i=0;i<N;i++){ __asm__ volatile("add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n":::"rax"); }
  double t=now()-t0; ghz = 8.0*N/t/1e9; printf("clock ~ %.2f GHz\n", ghz);
  for(int r=0;r<2;r++){bf16x16();bf16_chain1();bf16_4chains();bf16_8chains();fma16();permw8();permw8y();permb8();permt2w8();srlw8();bf8_permw4();bf8_permb4();bf8_permps4();bf8_permw4_srl3();bf16_permw8_srl6();}
  return 0;}
