/* Zen 4 issue-rate probe for the n = 4 CPU bodies (docs/BENCHMARKS.md, "Session 9 (n4)").
 *
 * Part 1: register-only throughput of independent zmm instructions, alone and interleaved
 * with vpdpbusd (cycles from a 1-cycle scalar add chain). Part 2: the ROCmFP2 n = 4 step
 * (R = 2 rows x CT = 4 columns: per column 6 loads from an L1 buffer, per row and column a
 * 4-deep vpdpbusd chain, vmulps, vcvtdq2ps, vfmadd231ps), with and without the two rows'
 * weight decode (load, shift, masks, 4 vpshufb, scale widening), in cycles per group-column.
 *
 * Build and run: gcc -O2 -mavx512f -mavx512bw -mavx512vnni -mavx512vbmi tools/zen4_pipe_probe.c \
 *   -o /tmp/probe && /work/quiet.sh /tmp/probe
 */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 10000000L
#define CL "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","xmm16","xmm17","xmm18","xmm19","xmm20","xmm21","xmm22","xmm23","xmm24","xmm25"
static double ghz;
#define BODY(name, asmtext, ninstr) \
static void name(void){ double t0=now(); for(long i=0;i<N;i++){ __asm__ volatile(asmtext ::: CL); } double t=now()-t0; printf("%-34s %.2f cyc/iter  %.3f cyc/instr\n", #name, t/N*ghz*1e9, t/N*1e9*ghz/ninstr);}
#define D(r) "vpdpbusd %%zmm20, %%zmm21, %%zmm" #r "\n"
#define F(r) "vfmadd231ps %%zmm20, %%zmm21, %%zmm" #r "\n"
#define M(r) "vmulps %%zmm20, %%zmm21, %%zmm" #r "\n"
#define P(r) "vpermb %%zmm20, %%zmm21, %%zmm" #r "\n"
#define S(r) "vpshufb %%zmm20, %%zmm21, %%zmm" #r "\n"
#define A(r) "vpaddd %%zmm20, %%zmm21, %%zmm" #r "\n"
#define C(r) "vcvtdq2ps %%zmm20, %%zmm" #r "\n"
#define T(r) "vpternlogd $0xf8, %%zmm20, %%zmm21, %%zmm" #r "\n"
#define D16 D(0)D(1)D(2)D(3)D(4)D(5)D(6)D(7)D(8)D(9)D(10)D(11)D(12)D(13)D(14)D(15)
BODY(dp16, D16, 16)
BODY(fma16, F(0)F(1)F(2)F(3)F(4)F(5)F(6)F(7)F(8)F(9)F(10)F(11)F(12)F(13)F(14)F(15), 16)
BODY(perm8, P(16)P(17)P(18)P(19)P(22)P(23)P(24)P(25), 8)
BODY(shuf8, S(16)S(17)S(18)S(19)S(22)S(23)S(24)S(25), 8)
BODY(dp16_fma4, D16 F(16)F(17)F(18)F(19), 20)
BODY(dp16_fma4_mul4, D16 F(16)F(17)F(18)F(19)M(22)M(23)M(24)M(25), 24)
BODY(dp16_perm4, D16 P(16)P(17)P(18)P(19), 20)
BODY(dp16_shuf4, D16 S(16)S(17)S(18)S(19), 20)
BODY(dp16_add8, D16 A(16)A(17)A(18)A(19)A(22)A(23)A(24)A(25), 24)
BODY(dp16_cvt4_add4, D16 C(16)C(17)C(18)C(19)A(22)A(23)A(24)A(25), 24)
BODY(dp16_tern8, D16 T(16)T(17)T(18)T(19)T(22)T(23)T(24)T(25), 24)
#define BODYP(name, asmtext, units) \
static void name(char*p){ double t0=now(); for(long i=0;i<N;i++){ __asm__ volatile(asmtext :: "r"(p) : CL2); } double t=now()-t0; printf("%-34s %.2f cyc/iter  %.3f cyc/group-col\n", #name, t/N*ghz*1e9, t/N*1e9*ghz/units);}
#define CL2 CL,"xmm26","xmm27","xmm28","xmm29"
/* per column: load q0..3 (22..25), a4 (20), d (27) from column block c at offset c*384 */
#define LC(c) "vmovdqa64 " #c "*384+0(%0), %%zmm22\n vmovdqa64 " #c "*384+64(%0), %%zmm23\n vmovdqa64 " #c "*384+128(%0), %%zmm24\n vmovdqa64 " #c "*384+192(%0), %%zmm25\n vmovdqa64 " #c "*384+256(%0), %%zmm20\n vmovaps " #c "*384+320(%0), %%zmm27\n"
#define U(acc,t,w,s) "vmovdqa64 %%zmm20, %%zmm" #t "\n vpdpbusd %%zmm22, %%zmm" #w ", %%zmm" #t "\n vpdpbusd %%zmm23, %%zmm" #w ", %%zmm" #t "\n vpdpbusd %%zmm24, %%zmm" #w ", %%zmm" #t "\n vpdpbusd %%zmm25, %%zmm" #w ", %%zmm" #t "\n vmulps %%zmm" #s ", %%zmm27, %%zmm26\n vcvtdq2ps %%zmm" #t ", %%zmm" #t "\n vfmadd231ps %%zmm" #t ", %%zmm26, %%zmm" #acc "\n"
#define COL(c,a0,a1) LC(c) U(a0,8,28,29) U(a1,9,21,29)
BODYP(loads_kernel, COL(0,0,1) COL(1,2,3) COL(2,4,5) COL(3,6,7), 8)
#define COLN(c,a0,a1) U(a0,8,28,29) U(a1,9,21,29)
BODYP(noloads_kernel, COLN(0,0,1) COLN(1,2,3) COLN(2,4,5) COLN(3,6,7), 8)
/* + decode of 2 rows: load 64B, srl, and x2, 4 shuf, cvtph path */
#define DEC "vmovdqu64 1536(%0), %%zmm10\n vpsrlw $4, %%zmm10, %%zmm11\n vpandq %%zmm12, %%zmm10, %%zmm10\n vpandq %%zmm12, %%zmm11, %%zmm11\n vpshufb %%zmm10, %%zmm13, %%zmm14\n vpshufb %%zmm10, %%zmm15, %%zmm16\n vpshufb %%zmm11, %%zmm13, %%zmm17\n vpshufb %%zmm11, %%zmm15, %%zmm18\n vpmovzxbw 1600(%0), %%ymm19\n vpsllw $7, %%ymm19, %%ymm19\n vcvtph2ps %%ymm19, %%zmm19\n"
BODYP(dec_loads_kernel, DEC DEC COL(0,0,1) COL(1,2,3) COL(2,4,5) COL(3,6,7), 8)
int main(void){
  double t0=now(); for(long i=0;i<N;i++){ __asm__ volatile("add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n add $1,%%rax\n":::"rax"); }
  double t=now()-t0; ghz = 8.0*N/t/1e9; printf("clock ~ %.2f GHz (1-cycle add chain)\n", ghz);
  dp16();fma16();perm8();shuf8();dp16_fma4();dp16_fma4_mul4();dp16_perm4();dp16_shuf4();dp16_add8();dp16_cvt4_add4();dp16_tern8();
  char*p=aligned_alloc(64,4096); for(int i=0;i<4096;i++)p[i]=(char)(i*7);
  for(int r=0;r<6;r++){loads_kernel(p);noloads_kernel(p);dec_loads_kernel(p);}
  return 0;}
