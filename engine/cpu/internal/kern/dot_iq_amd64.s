//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// Kernels for the i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M) and TQ2_0 against Q8_K, and for NVFP4, Q1_0, Q2_0 against Q8_0.
//
// The i-quants' 32-value sub-blocks are assembled from whole-word grid
// points (tables in iqtab_amd64.go, R10) and sign words (R11: eight bytes
// of ±1 per sign index) by scalar index arithmetic; VPSIGNB puts the signs
// on the activations and VPMADDUBSW multiplies them by the unsigned grid
// bytes; VPMADDWD applies the sub-block scale. Y12 holds the super-block's
// int32 sums, Y0 (and Y1) the float accumulators. Every macro sits before the
// first TEXT, so that vet reads them with the right frames.

#define HSUM8 VEXTRACTF128 $1, Y0, X1; VADDPS X1, X0, X0; VMOVHLPS X0, X0, X1; VADDPS X1, X0, X0; VMOVSHDUP X0, X1; VADDSS X1, X0, X0
#define BCASTD(v, x, y) MOVL v, AX; VMOVD AX, x; VPBROADCASTD x, y

#define KARGS \
	MOVQ n+0(FP), CX        \
	MOVQ w_base+8(FP), SI   \
	MOVQ a_base+32(FP), DI  \
	SHRQ $8, CX             \
	VXORPS Y0, Y0, Y0       \
	VXORPS Y1, Y1, Y1

// DK sets Y10 to fp16(at w)·d_a, d_a the Q8_K float32 at 0(DI).
#define DK(w) \
	VPBROADCASTW w, X10          \
	VCVTPH2PS    X10, Y10        \
	VBROADCASTSS 0(DI), Y11      \
	VMULPS       Y11, Y10, Y10

#define KFOLD \
	VCVTDQ2PS   Y12, Y12         \
	VFMADD231PS Y12, Y10, Y0

// RESULTSCALED returns hsum(Y0)·f (f a float32 bit pattern).
#define RESULTSCALED(f) \
	HSUM8                        \
	MOVL  f, AX                  \
	VMOVD AX, X1                 \
	VMULSS X1, X0, X0            \
	VZEROUPPER                   \
	MOVSS X0, ret+56(FP)         \
	RET

// LSBCAST broadcasts the int16 in BX to Y7.
#define LSBCAST VMOVD BX, X7; VPBROADCASTW X7, Y7

// LSPAIR sets Y7 to [2·(b&15)+1 ×8 | 2·(b>>4)+1 ×8] for the byte at addr.
#define LSPAIR(addr) \
	MOVBLZX addr, AX             \
	MOVL    AX, BX               \
	ANDL    $15, AX              \
	SHRL    $4, BX               \
	LEAL    1(AX)(AX*1), AX      \
	LEAL    1(BX)(BX*1), BX      \
	VMOVD   AX, X7               \
	VPBROADCASTW X7, X7          \
	VMOVD   BX, X8               \
	VPBROADCASTW X8, X8          \
	VINSERTI128 $1, X8, Y7, Y7

// SIGNDOT: Y4 unsigned grid bytes, Y5 ±1 signs, activations at a, scale
// words in Y7 → Y12 += Σ scale·grid·sign·a.
#define SIGNDOT(a) \
	VMOVDQU    a, Y6             \
	VPSIGNB    Y5, Y6, Y6        \
	VPMADDUBSW Y6, Y4, Y6        \
	VPMADDWD   Y7, Y6, Y6        \
	VPADDD     Y6, Y12, Y12

// SIGNS7 builds Y5 from the four 7-bit sign indices in BX (bits 0..27).
#define SIGNS7 \
	MOVL BX, AX                  \
	ANDL $127, AX                \
	VMOVQ (R11)(AX*8), X5        \
	MOVL BX, AX                  \
	SHRL $7, AX                  \
	ANDL $127, AX                \
	VPINSRQ $1, (R11)(AX*8), X5, X5 \
	MOVL BX, AX                  \
	SHRL $14, AX                 \
	ANDL $127, AX                \
	VMOVQ (R11)(AX*8), X6        \
	MOVL BX, AX                  \
	SHRL $21, AX                 \
	ANDL $127, AX                \
	VPINSRQ $1, (R11)(AX*8), X6, X6 \
	VINSERTI128 $1, X6, Y5, Y5

// SIGNS8 builds Y5 from the four sign bytes at off(SI).
#define SIGNS8(off) \
	MOVBLZX off(SI), AX          \
	VMOVQ (R11)(AX*8), X5        \
	MOVBLZX off+1(SI), AX        \
	VPINSRQ $1, (R11)(AX*8), X5, X5 \
	MOVBLZX off+2(SI), AX        \
	VMOVQ (R11)(AX*8), X6        \
	MOVBLZX off+3(SI), AX        \
	VPINSRQ $1, (R11)(AX*8), X6, X6 \
	VINSERTI128 $1, X6, Y5, Y5

// ---- IQ2_XXS: fp16 d, then per 32 values 4 grid bytes + a uint32 of
// 4×7 sign bits and a 4-bit scale. Result ×1/8.
#define IQ2XXSSUB(wo, ao) \
	MOVBLZX wo(SI), AX           \
	VMOVQ (R10)(AX*8), X4        \
	MOVBLZX wo+1(SI), AX         \
	VPINSRQ $1, (R10)(AX*8), X4, X4 \
	MOVBLZX wo+2(SI), AX         \
	VMOVQ (R10)(AX*8), X5        \
	MOVBLZX wo+3(SI), AX         \
	VPINSRQ $1, (R10)(AX*8), X5, X5 \
	VINSERTI128 $1, X5, Y4, Y4   \
	MOVL wo+4(SI), BX            \
	SIGNS7                       \
	SHRL $28, BX                 \
	LEAL 1(BX)(BX*1), BX         \
	LSBCAST                      \
	SIGNDOT(ao(DI))

// ---- IQ2_XS: per 32 values four uint16 (9-bit grid index, 7-bit sign
// index) and one byte of two 4-bit scales. Result ×1/8.
#define IQ2XSENT(wo, xg, xs, first) \
	MOVWLZX wo(SI), AX           \
	MOVL AX, BX                  \
	ANDL $511, AX                \
	SHRL $9, BX

#define IQ2XSSUB(wo, sc, ao) \
	IQ2XSENT(wo, 0, 0, 0)        \
	VMOVQ (R10)(AX*8), X4        \
	VMOVQ (R11)(BX*8), X5        \
	IQ2XSENT(wo+2, 0, 0, 0)      \
	VPINSRQ $1, (R10)(AX*8), X4, X4 \
	VPINSRQ $1, (R11)(BX*8), X5, X5 \
	IQ2XSENT(wo+4, 0, 0, 0)      \
	VMOVQ (R10)(AX*8), X6        \
	VMOVQ (R11)(BX*8), X7        \
	IQ2XSENT(wo+6, 0, 0, 0)      \
	VPINSRQ $1, (R10)(AX*8), X6, X6 \
	VPINSRQ $1, (R11)(BX*8), X7, X7 \
	VINSERTI128 $1, X6, Y4, Y4   \
	VINSERTI128 $1, X7, Y5, Y5   \
	LSPAIR(sc(SI))               \
	SIGNDOT(ao(DI))

// ---- IQ2_S: 32 grid bytes, 32 sign bytes, qh[8] (2 high index bits per
// grid point), scales[8]. Result ×1/8.
#define IQ2SIDX(q, sh) \
	MOVBLZX q(SI), AX            \
	MOVL DX, BX                  \
	SHLL $sh, BX                 \
	ANDL $0x300, BX              \
	ORL  BX, AX

#define IQ2SSUB(q, qh, sg, sc, ao) \
	MOVBLZX qh(SI), DX           \
	IQ2SIDX(q, 8)                \
	VMOVQ (R10)(AX*8), X4        \
	IQ2SIDX(q+1, 6)              \
	VPINSRQ $1, (R10)(AX*8), X4, X4 \
	IQ2SIDX(q+2, 4)              \
	VMOVQ (R10)(AX*8), X6        \
	IQ2SIDX(q+3, 2)              \
	VPINSRQ $1, (R10)(AX*8), X6, X6 \
	VINSERTI128 $1, X6, Y4, Y4   \
	SIGNS8(sg)               \
	LSPAIR(sc(SI))               \
	SIGNDOT(ao(DI))

// ---- IQ3_XXS: 64 grid bytes (8 four-value points per 32), then per 32
// values a uint32 of 4×7 sign bits and a 4-bit scale. Result ×1/4.
#define IQ3XXSSUB(q, gas, ao) \
	MOVBLZX q(SI), AX            \
	VMOVD (R10)(AX*4), X4        \
	MOVBLZX q+1(SI), AX          \
	VPINSRD $1, (R10)(AX*4), X4, X4 \
	MOVBLZX q+2(SI), AX          \
	VPINSRD $2, (R10)(AX*4), X4, X4 \
	MOVBLZX q+3(SI), AX          \
	VPINSRD $3, (R10)(AX*4), X4, X4 \
	MOVBLZX q+4(SI), AX          \
	VMOVD (R10)(AX*4), X5        \
	MOVBLZX q+5(SI), AX          \
	VPINSRD $1, (R10)(AX*4), X5, X5 \
	MOVBLZX q+6(SI), AX          \
	VPINSRD $2, (R10)(AX*4), X5, X5 \
	MOVBLZX q+7(SI), AX          \
	VPINSRD $3, (R10)(AX*4), X5, X5 \
	VINSERTI128 $1, X5, Y4, Y4   \
	MOVL gas(SI), BX             \
	SIGNS7                       \
	SHRL $28, BX                 \
	LEAL 1(BX)(BX*1), BX         \
	LSBCAST                      \
	SIGNDOT(ao(DI))

// ---- IQ3_S: 64 grid bytes, qh[8] (9th index bit per point), 32 sign
// bytes, scales[4] (two 4-bit scales each).
#define IQ3SIDX(q, sh) \
	MOVBLZX q(SI), AX            \
	MOVL DX, BX                  \
	SHLL $sh, BX                 \
	ANDL $256, BX                \
	ORL  BX, AX

#define IQ3SSUB(q, qh, sg, sc, scsh, ao) \
	MOVBLZX qh(SI), DX           \
	IQ3SIDX(q, 8)                \
	VMOVD (R10)(AX*4), X4        \
	IQ3SIDX(q+1, 7)              \
	VPINSRD $1, (R10)(AX*4), X4, X4 \
	IQ3SIDX(q+2, 6)              \
	VPINSRD $2, (R10)(AX*4), X4, X4 \
	IQ3SIDX(q+3, 5)              \
	VPINSRD $3, (R10)(AX*4), X4, X4 \
	IQ3SIDX(q+4, 4)              \
	VMOVD (R10)(AX*4), X5        \
	IQ3SIDX(q+5, 3)              \
	VPINSRD $1, (R10)(AX*4), X5, X5 \
	IQ3SIDX(q+6, 2)              \
	VPINSRD $2, (R10)(AX*4), X5, X5 \
	IQ3SIDX(q+7, 1)              \
	VPINSRD $3, (R10)(AX*4), X5, X5 \
	VINSERTI128 $1, X5, Y4, Y4   \
	SIGNS8(sg)               \
	MOVBLZX sc(SI), BX           \
	SHRL $scsh, BX               \
	ANDL $15, BX                 \
	LEAL 1(BX)(BX*1), BX         \
	LSBCAST                      \
	SIGNDOT(ao(DI))

// ---- IQ1_S: qs[32] (grid index low bytes), qh uint16[8] (3 high index
// bits per point, 3-bit scale, shift sign). The ±1/8 shift uses Q8_K's
// bsums, summed exactly in R12; Y14 = bytes 0x01, X13 the shift terms,
// X15 = 1/8.
#define IQ1SIDX(q, sh) \
	MOVBLZX q(SI), AX            \
	MOVL DX, BX                  \
	SHRL $sh, BX                 \
	ANDL $7, BX                  \
	SHLL $8, BX                  \
	ORL  BX, AX

#define IQ1SSUB(q, qh, ao, bs) \
	MOVWLZX qh(SI), DX           \
	IQ1SIDX(q, 0)                \
	VMOVQ (R10)(AX*8), X4        \
	IQ1SIDX(q+1, 3)              \
	VPINSRQ $1, (R10)(AX*8), X4, X4 \
	IQ1SIDX(q+2, 6)              \
	VMOVQ (R10)(AX*8), X5        \
	IQ1SIDX(q+3, 9)              \
	VPINSRQ $1, (R10)(AX*8), X5, X5 \
	VINSERTI128 $1, X5, Y4, Y4   \
	VMOVDQU    ao(DI), Y6        \
	VPSIGNB    Y4, Y6, Y6        \
	VPMADDUBSW Y6, Y14, Y6       \
	MOVL DX, BX                  \
	SHRL $12, BX                 \
	ANDL $7, BX                  \
	LEAL 1(BX)(BX*1), BX         \
	LSBCAST                      \
	VPMADDWD   Y7, Y6, Y6        \
	VPADDD     Y6, Y12, Y12      \
	MOVWQSX bs(DI), AX           \
	MOVWQSX bs+2(DI), R13        \
	ADDQ R13, AX                 \
	IMULQ BX, AX                 \
	MOVWQSX qh(SI), R13          \
	SARQ $63, R13                \
	XORQ R13, AX                 \
	SUBQ R13, AX                 \
	ADDQ AX, R12

// ---- IQ1_M: qs[32], qh[16] (3+3 high index bits and 2 shift signs per
// byte), scales uint16[4] (3-bit scales; the fp16 super-scale in the top
// nibbles). Y12 Σ scale·grid·a, Y9 Σ scale·shift·a, Y14 bytes 0x01.
#define IQ1MIDX(q, h, sh) \
	MOVBLZX q(SI), AX            \
	MOVL h, BX                   \
	SHLL $sh, BX                 \
	ANDL $0x700, BX              \
	ORL  BX, AX

#define IQ1MSUB(q, qh, sc, scsh, ao) \
	MOVBLZX qh(SI), DX           \
	MOVBLZX qh+1(SI), R13        \
	IQ1MIDX(q, DX, 8)            \
	VMOVQ (R10)(AX*8), X4        \
	IQ1MIDX(q+1, DX, 4)          \
	VPINSRQ $1, (R10)(AX*8), X4, X4 \
	IQ1MIDX(q+2, R13, 8)         \
	VMOVQ (R10)(AX*8), X5        \
	IQ1MIDX(q+3, R13, 4)         \
	VPINSRQ $1, (R10)(AX*8), X5, X5 \
	VINSERTI128 $1, X5, Y4, Y4   \
	MOVL DX, AX                  \
	SHRL $3, AX                  \
	ANDL $1, AX                  \
	MOVL DX, BX                  \
	SHRL $6, BX                  \
	ANDL $2, BX                  \
	ORL  BX, AX                  \
	MOVL R13, BX                 \
	SHRL $1, BX                  \
	ANDL $4, BX                  \
	ORL  BX, AX                  \
	MOVL R13, BX                 \
	SHRL $4, BX                  \
	ANDL $8, BX                  \
	ORL  BX, AX                  \
	SHLL $5, AX                  \
	VMOVDQU (R11)(AX*1), Y5      \
	VMOVDQU    ao(DI), Y6        \
	VPSIGNB    Y4, Y6, Y7        \
	VPMADDUBSW Y7, Y14, Y7       \
	VPSIGNB    Y5, Y6, Y6        \
	VPMADDUBSW Y6, Y14, Y6       \
	MOVWLZX sc(SI), BX           \
	SHRL $scsh, BX               \
	MOVL BX, AX                  \
	ANDL $7, AX                  \
	SHRL $3, BX                  \
	ANDL $7, BX                  \
	LEAL 1(AX)(AX*1), AX         \
	LEAL 1(BX)(BX*1), BX         \
	VMOVD AX, X8                 \
	VPBROADCASTW X8, X8          \
	VMOVD BX, X15                \
	VPBROADCASTW X15, X15        \
	VINSERTI128 $1, X15, Y8, Y8  \
	VPMADDWD Y8, Y7, Y7          \
	VPADDD   Y7, Y12, Y12        \
	VPMADDWD Y8, Y6, Y6          \
	VPADDD   Y6, Y9, Y9

// ---- TQ2_0: qs[64] (2-bit q, value q−1), fp16 d. Σ(q−1)·a = Σq·a − Σa.
#define TQ2GROUP(a) \
	VPMADDUBSW a, Y4, Y4         \
	VPADDW     Y4, Y12, Y12

#define TQ2HALF(q, o) \
	VMOVDQU  q, Y2               \
	VPAND    Y9, Y2, Y4          \
	TQ2GROUP(o(DI))              \
	VPSRLW   $2, Y2, Y4          \
	VPAND    Y9, Y4, Y4          \
	TQ2GROUP(o+32(DI))           \
	VPSRLW   $4, Y2, Y4          \
	VPAND    Y9, Y4, Y4          \
	TQ2GROUP(o+64(DI))           \
	VPSRLW   $6, Y2, Y4          \
	VPAND    Y9, Y4, Y4          \
	TQ2GROUP(o+96(DI))

// ---- NVFP4 · Q8_0: per 64 values four UE4M3 scales and 32 bytes of E2M1
// codes; each Q8_0 block (32 values) covers two 16-value sub-blocks.
#define NVHALF(k, wq, ad) \
	VMOVDQU      wq(SI), X4         \
	VPSRLW       $4, X4, X5         \
	VPAND        X14, X4, X4        \
	VPAND        X14, X5, X5        \
	VPUNPCKLQDQ  X5, X4, X6         \
	VPUNPCKHQDQ  X5, X4, X7         \
	VINSERTI128  $1, X7, Y6, Y6     \
	VPSHUFB      Y6, Y13, Y6        \
	VMOVDQU      ad+2(DI), Y5       \
	VPSIGNB      Y6, Y5, Y5         \
	VPSIGNB      Y6, Y6, Y6         \
	VPMADDUBSW   Y5, Y6, Y6         \
	VPMADDWD     Y15, Y6, Y6        \
	VCVTDQ2PS    Y6, Y6             \
	MOVBLZX      k(SI), AX          \
	VBROADCASTSS (R10)(AX*4), X8    \
	MOVBLZX      k+1(SI), AX        \
	VBROADCASTSS (R10)(AX*4), X9    \
	VINSERTF128  $1, X9, Y8, Y8     \
	VPBROADCASTW ad(DI), X9         \
	VCVTPH2PS    X9, Y9             \
	VMULPS       Y9, Y8, Y8         \
	VFMADD231PS  Y6, Y8, Y0

// ---- Q1_0 · Q8_0: per 128 values fp16 d and 128 sign bits (set +1, clear
// −1); each 32 bits pair with one Q8_0 block.
#define Q10SUB(bits, ad) \
	VPBROADCASTD bits(SI), Y7       \
	VPSHUFB      Y11, Y7, Y7        \
	VPOR         Y10, Y7, Y7        \
	VPCMPEQB     Y9, Y7, Y7         \
	VPXOR        Y9, Y7, Y7         \
	VPOR         Y14, Y7, Y7        \
	VMOVDQU      ad+2(DI), Y6       \
	VPSIGNB      Y7, Y6, Y6         \
	VPMADDUBSW   Y6, Y14, Y6        \
	VPMADDWD     Y15, Y6, Y6        \
	VCVTDQ2PS    Y6, Y6             \
	VPBROADCASTW ad(DI), X8         \
	VCVTPH2PS    X8, Y8             \
	VMULPS       Y12, Y8, Y8        \
	VFMADD231PS  Y6, Y8, Y0

// ---- Q2_0 · Q8_0: per 64 values fp16 d and 16 bytes of 2-bit q (value
// q−1, four per byte in order); Σ(q−1)·a = Σq·a − Σa per Q8_0 block.
#define Q20SUB(q, ad) \
	VPBROADCASTQ q(SI), Y4          \
	VPSHUFB      Y11, Y4, Y4        \
	VPAND        Y10, Y4, Y5        \
	VPSRLW       $4, Y4, Y4         \
	VPAND        Y9, Y4, Y4         \
	VPOR         Y5, Y4, Y4         \
	VPSHUFB      Y4, Y13, Y4        \
	VMOVDQU      ad+2(DI), Y6       \
	VPMADDUBSW   Y6, Y4, Y7         \
	VPMADDUBSW   Y6, Y14, Y8        \
	VPSUBW       Y8, Y7, Y7         \
	VPMADDWD     Y15, Y7, Y7        \
	VCVTDQ2PS    Y7, Y7             \
	VPBROADCASTW ad(DI), X8         \
	VCVTPH2PS    X8, Y8             \
	VMULPS       Y12, Y8, Y8        \
	VFMADD231PS  Y7, Y8, Y0

#define Q8ARGS(shift) \
	MOVQ n+0(FP), CX        \
	MOVQ w_base+8(FP), SI   \
	MOVQ a_base+32(FP), DI  \
	SHRQ $shift, CX         \
	VXORPS Y0, Y0, Y0       \
	VPCMPEQW Y15, Y15, Y15  \
	VPSRLW $15, Y15, Y15

#define RESULT0 \
	HSUM8                   \
	VZEROUPPER              \
	MOVSS X0, ret+56(FP)    \
	RET

// func dotIQ2_XXSAVX2(n int, w, a []byte) float32
TEXT ·dotIQ2_XXSAVX2(SB), NOSPLIT, $0-60
	KARGS
	LEAQ ·iq2xxsGrid64(SB), R10
	LEAQ ·signs7(SB), R11
	TESTQ CX, CX
	JZ    iq2xxsdone

iq2xxsloop:
	VPXOR Y12, Y12, Y12
	IQ2XXSSUB(2, 4)
	IQ2XXSSUB(10, 36)
	IQ2XXSSUB(18, 68)
	IQ2XXSSUB(26, 100)
	IQ2XXSSUB(34, 132)
	IQ2XXSSUB(42, 164)
	IQ2XXSSUB(50, 196)
	IQ2XXSSUB(58, 228)
	DK(0(SI))
	KFOLD
	ADDQ $66, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xxsloop

iq2xxsdone:
	RESULTSCALED($0x3e000000)

// func dotIQ2_XSAVX2(n int, w, a []byte) float32
TEXT ·dotIQ2_XSAVX2(SB), NOSPLIT, $0-60
	KARGS
	LEAQ ·iq2xsGrid64(SB), R10
	LEAQ ·signs7(SB), R11
	TESTQ CX, CX
	JZ    iq2xsdone

iq2xsloop:
	VPXOR Y12, Y12, Y12
	IQ2XSSUB(2, 66, 4)
	IQ2XSSUB(10, 67, 36)
	IQ2XSSUB(18, 68, 68)
	IQ2XSSUB(26, 69, 100)
	IQ2XSSUB(34, 70, 132)
	IQ2XSSUB(42, 71, 164)
	IQ2XSSUB(50, 72, 196)
	IQ2XSSUB(58, 73, 228)
	DK(0(SI))
	KFOLD
	ADDQ $74, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xsloop

iq2xsdone:
	RESULTSCALED($0x3e000000)

// func dotIQ2_SAVX2(n int, w, a []byte) float32
TEXT ·dotIQ2_SAVX2(SB), NOSPLIT, $0-60
	KARGS
	LEAQ ·iq2sGrid64(SB), R10
	LEAQ ·signs8(SB), R11
	TESTQ CX, CX
	JZ    iq2sdone

iq2sloop:
	VPXOR Y12, Y12, Y12
	IQ2SSUB(2, 66, 34, 74, 4)
	IQ2SSUB(6, 67, 38, 75, 36)
	IQ2SSUB(10, 68, 42, 76, 68)
	IQ2SSUB(14, 69, 46, 77, 100)
	IQ2SSUB(18, 70, 50, 78, 132)
	IQ2SSUB(22, 71, 54, 79, 164)
	IQ2SSUB(26, 72, 58, 80, 196)
	IQ2SSUB(30, 73, 62, 81, 228)
	DK(0(SI))
	KFOLD
	ADDQ $82, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2sloop

iq2sdone:
	RESULTSCALED($0x3e000000)

// func dotIQ3_XXSAVX2(n int, w, a []byte) float32
TEXT ·dotIQ3_XXSAVX2(SB), NOSPLIT, $0-60
	KARGS
	LEAQ ·iq3xxsGrid32(SB), R10
	LEAQ ·signs7(SB), R11
	TESTQ CX, CX
	JZ    iq3xxsdone

iq3xxsloop:
	VPXOR Y12, Y12, Y12
	IQ3XXSSUB(2, 66, 4)
	IQ3XXSSUB(10, 70, 36)
	IQ3XXSSUB(18, 74, 68)
	IQ3XXSSUB(26, 78, 100)
	IQ3XXSSUB(34, 82, 132)
	IQ3XXSSUB(42, 86, 164)
	IQ3XXSSUB(50, 90, 196)
	IQ3XXSSUB(58, 94, 228)
	DK(0(SI))
	KFOLD
	ADDQ $98, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3xxsloop

iq3xxsdone:
	RESULTSCALED($0x3e800000)

// func dotIQ3_SAVX2(n int, w, a []byte) float32
TEXT ·dotIQ3_SAVX2(SB), NOSPLIT, $0-60
	KARGS
	LEAQ ·iq3sGrid32(SB), R10
	LEAQ ·signs8(SB), R11
	TESTQ CX, CX
	JZ    iq3sdone

iq3sloop:
	VPXOR Y12, Y12, Y12
	IQ3SSUB(2, 66, 74, 106, 0, 4)
	IQ3SSUB(10, 67, 78, 106, 4, 36)
	IQ3SSUB(18, 68, 82, 107, 0, 68)
	IQ3SSUB(26, 69, 86, 107, 4, 100)
	IQ3SSUB(34, 70, 90, 108, 0, 132)
	IQ3SSUB(42, 71, 94, 108, 4, 164)
	IQ3SSUB(50, 72, 98, 109, 0, 196)
	IQ3SSUB(58, 73, 102, 109, 4, 228)
	DK(0(SI))
	KFOLD
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3sloop

iq3sdone:
	RESULTSCALED($0x3f800000)

// func dotIQ1_SAVX2(n int, w, a []byte) float32
TEXT ·dotIQ1_SAVX2(SB), NOSPLIT, $0-60
	KARGS
	LEAQ ·iq1sGrid64(SB), R10
	BCASTD($0x01010101, X14, Y14)
	VXORPS X13, X13, X13
	TESTQ CX, CX
	JZ    iq1sdone

iq1sloop:
	VPXOR Y12, Y12, Y12
	XORQ  R12, R12
	IQ1SSUB(2, 34, 4, 260)
	IQ1SSUB(6, 36, 36, 264)
	IQ1SSUB(10, 38, 68, 268)
	IQ1SSUB(14, 40, 100, 272)
	IQ1SSUB(18, 42, 132, 276)
	IQ1SSUB(22, 44, 164, 280)
	IQ1SSUB(26, 46, 196, 284)
	IQ1SSUB(30, 48, 228, 288)
	DK(0(SI))
	KFOLD
	VCVTSI2SSQ R12, X8, X8
	MOVL  $0x3e000000, AX
	VMOVD AX, X15
	VMULSS X15, X8, X8
	VFMADD231SS X8, X10, X13
	ADDQ $50, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1sloop

iq1sdone:
	HSUM8
	VADDSS X13, X0, X0
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dotIQ1_MAVX2(n int, w, a []byte) float32
TEXT ·dotIQ1_MAVX2(SB), NOSPLIT, $0-60
	KARGS
	LEAQ ·iq1sGrid64(SB), R10
	LEAQ ·iq1mDelta(SB), R11
	BCASTD($0x01010101, X14, Y14)
	TESTQ CX, CX
	JZ    iq1mdone

iq1mloop:
	MOVWLZX 48(SI), AX
	SHRL    $12, AX
	MOVWLZX 50(SI), BX
	SHRL    $8, BX
	ANDL    $0xf0, BX
	ORL     BX, AX
	MOVWLZX 52(SI), BX
	SHRL    $4, BX
	ANDL    $0xf00, BX
	ORL     BX, AX
	MOVWLZX 54(SI), BX
	ANDL    $0xf000, BX
	ORL     BX, AX
	VMOVD   AX, X10
	VCVTPH2PS X10, X10
	VBROADCASTSS X10, Y10
	VBROADCASTSS 0(DI), Y11
	VMULPS  Y11, Y10, Y10
	VPXOR Y12, Y12, Y12
	VPXOR Y9, Y9, Y9
	IQ1MSUB(0, 32, 48, 0, 4)
	IQ1MSUB(4, 34, 48, 6, 36)
	IQ1MSUB(8, 36, 50, 0, 68)
	IQ1MSUB(12, 38, 50, 6, 100)
	IQ1MSUB(16, 40, 52, 0, 132)
	IQ1MSUB(20, 42, 52, 6, 164)
	IQ1MSUB(24, 44, 54, 0, 196)
	IQ1MSUB(28, 46, 54, 6, 228)
	KFOLD
	VCVTDQ2PS   Y9, Y9
	VFMADD231PS Y9, Y10, Y1
	ADDQ $56, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1mloop

iq1mdone:
	MOVL $0x3e000000, AX
	VMOVD AX, X2
	VBROADCASTSS X2, Y2
	VFMADD231PS Y1, Y2, Y0
	RESULT0

// func dotTQ2_0AVX2(n int, w, a []byte) float32
TEXT ·dotTQ2_0AVX2(SB), NOSPLIT, $0-60
	KARGS
	BCASTD($0x03030303, X9, Y9)
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15
	TESTQ CX, CX
	JZ    tq2done

tq2loop:
	VPXOR Y12, Y12, Y12
	TQ2HALF(0(SI), 4)
	TQ2HALF(32(SI), 132)
	VPMADDWD Y15, Y12, Y12
	VPMADDWD 260(DI), Y15, Y6
	VPSUBD   Y6, Y12, Y12
	DK(64(SI))
	KFOLD
	ADDQ $66, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  tq2loop

tq2done:
	RESULT0

// func dotNVFP4AVX2(n int, w, a []byte) float32
TEXT ·dotNVFP4AVX2(SB), NOSPLIT, $0-60
	Q8ARGS(6)
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesMXFP4(SB), Y13
	LEAQ ·ue4m3HalfTab(SB), R10
	TESTQ CX, CX
	JZ    nvdone

nvloop:
	NVHALF(0, 4, 0)
	NVHALF(2, 20, 34)
	ADDQ $36, SI
	ADDQ $68, DI
	DECQ CX
	JNZ  nvloop

nvdone:
	RESULT0

// func dotQ1_0AVX2(n int, w, a []byte) float32
TEXT ·dotQ1_0AVX2(SB), NOSPLIT, $0-60
	Q8ARGS(7)
	VMOVDQU   bitShufIQ<>(SB), Y11
	MOVQ      $0x7fbfdfeff7fbfdfe, AX
	VMOVQ     AX, X10
	VPBROADCASTQ X10, Y10
	VPCMPEQB  Y9, Y9, Y9
	BCASTD($0x01010101, X14, Y14)
	TESTQ CX, CX
	JZ    q10done

q10loop:
	VPBROADCASTW 0(SI), X12
	VCVTPH2PS    X12, Y12
	Q10SUB(2, 0)
	Q10SUB(6, 34)
	Q10SUB(10, 68)
	Q10SUB(14, 102)
	ADDQ $18, SI
	ADDQ $136, DI
	DECQ CX
	JNZ  q10loop

q10done:
	RESULT0

// func dotQ2_0AVX2(n int, w, a []byte) float32
TEXT ·dotQ2_0AVX2(SB), NOSPLIT, $0-60
	Q8ARGS(6)
	VMOVDQU ·q2_0Rep(SB), Y11
	BCASTD($0x00000c03, X10, Y10)
	BCASTD($0x0c030000, X9, Y9)
	VBROADCASTI128 ·q2_0Tab(SB), Y13
	BCASTD($0x01010101, X14, Y14)
	TESTQ CX, CX
	JZ    q20done

q20loop:
	VPBROADCASTW 0(SI), X12
	VCVTPH2PS    X12, Y12
	Q20SUB(2, 0)
	Q20SUB(10, 34)
	ADDQ $18, SI
	ADDQ $68, DI
	DECQ CX
	JNZ  q20loop

q20done:
	RESULT0

DATA bitShufIQ<>+0(SB)/8, $0x0000000000000000
DATA bitShufIQ<>+8(SB)/8, $0x0101010101010101
DATA bitShufIQ<>+16(SB)/8, $0x0202020202020202
DATA bitShufIQ<>+24(SB)/8, $0x0303030303030303
GLOBL bitShufIQ<>(SB), RODATA|NOPTR, $32
