//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// Four-weight-row matvec kernels (decode) of Q4_K, Q5_K and Q6_K against
// Q8_K, and of F32, F16 and BF16: dotR4<T>AVX2(n, w, wstride, a, out) writes
// to out[j] the dot product of the weight row at w + j·wstride with the
// activation row a, for j = 0..3. Each row gets exactly the float32
// operations of the single-row kernel of its type (dot_k_amd64.s,
// dot_f_amd64.s), in the same order; the integer sums are exact, so they
// may be formed differently:
//
//   - Q4_K/Q5_K: scales and mins decoded in general registers (as ggml's
//     utmp), the sub-block scale pairs taken from a register by VPSHUFB
//     rather than from the stack;
//   - Q6_K: unsigned q (0..63) times a, minus 32·a per int16 pair (ggml's
//     own form, the 32·a pairs computed once for the four rows), giving the
//     int16 pairs of (q − 32)·a that the single-row kernel forms by VPSIGNB.
//
// A pointer runs linearly over the weight rows r4Lead rows (two groups of
// four) ahead and prefetches them (four interleaved row streams defeat the hardware
// prefetcher; one linear stream does not).
//
// Registers: SI weight row 0, R8 wstride, R9 3·wstride, DX the current
// row, DI activations, CX super-blocks, R13 prefetch, Y0..Y3 row
// accumulators. Every macro precedes the first TEXT.

#define BCASTD(v, x, y) MOVL v, BX; VMOVD BX, x; VPBROADCASTD x, y



// ARGSK4: shift is log2 of the values per loop step.
#define ARGSK4(shift) \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ wstride+32(FP), R8    \
	LEAQ (R8)(R8*2), R9        \
	MOVQ a_base+40(FP), DI     \
	MOVQ ·r4Lead(SB), R13      \
	IMULQ R8, R13              \
	ADDQ SI, R13               \
	SHRQ $shift, CX            \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3


#define ROW0 MOVQ SI, DX
#define ROW1 LEAQ (SI)(R8*1), DX
#define ROW2 LEAQ (SI)(R8*2), DX
#define ROW3 LEAQ (SI)(R9*1), DX

// KSC4 decodes the twelve 6-bit scale/min bytes at 4(DX) to 16 int16 in Y7:
// scales 0..7 in the low half, mins 0..7 in the high half.
#define KSC4 \
	MOVL  4(DX), R10           \
	MOVL  8(DX), R11           \
	MOVL  12(DX), R12          \
	MOVL  R12, AX              \
	SHRL  $4, AX               \
	ANDL  $0x0f0f0f0f, AX      \
	MOVL  R11, BX              \
	SHRL  $6, BX               \
	ANDL  $0x03030303, BX      \
	SHLL  $4, BX               \
	ORL   BX, AX               \
	ANDL  $0x3f3f3f3f, R11     \
	ANDL  $0x0f0f0f0f, R12     \
	MOVL  R10, BX              \
	SHRL  $6, BX               \
	ANDL  $0x03030303, BX      \
	SHLL  $4, BX               \
	ORL   BX, R12              \
	ANDL  $0x3f3f3f3f, R10     \
	SHLQ  $32, R12             \
	ORQ   R12, R10             \
	SHLQ  $32, AX              \
	ORQ   AX, R11              \
	VMOVQ R10, X7              \
	VPINSRQ $1, R11, X7, X7    \
	VPMOVZXBW X7, Y7

// KMIN4: accm = fma(−dmin·d_a, float(madd(mins, X15)), accm), four lanes
// (X15 = pairwise sums of the activation's bsums).
#define KMIN4(accm) \
	VEXTRACTI128 $1, Y7, X12   \
	VPMADDWD     X15, X12, X12 \
	VCVTDQ2PS    X12, X12      \
	VCVTPH2PS    2(DX), X13    \
	VMULSS       (DI), X13, X13 \
	VBROADCASTSS X13, X13      \
	VFNMADD231PS X12, X13, accm

// KMIN5: the same reduced to a scalar first (Q5_K's summs).
#define KMIN5(accm) \
	VEXTRACTI128 $1, Y7, X12   \
	VPMADDWD     X15, X12, X12 \
	VPSHUFD      $0x4e, X12, X13 \
	VPADDD       X13, X12, X12 \
	VPSHUFD      $0xb1, X12, X13 \
	VPADDD       X13, X12, X12 \
	VCVTDQ2PS    X12, X12      \
	VCVTPH2PS    2(DX), X13    \
	VMULSS       (DI), X13, X13 \
	VFNMADD231SS X12, X13, accm

// KDFMA: acc = fma(d_w·d_a, float(Y12), acc), d_w the fp16 at 0(DX).
#define KDFMA(acc) \
	VCVTDQ2PS    Y12, Y12      \
	VCVTPH2PS    0(DX), X13    \
	VMULSS       (DI), X13, X13 \
	VBROADCASTSS X13, Y13      \
	VFMADD231PS  Y12, Y13, acc

// BSUMS: X15 = pairwise sums of the 16 bsums (one per 32 values).
#define BSUMS \
	VMOVDQU      260(DI), Y12  \
	VEXTRACTI128 $1, Y12, X13  \
	VPHADDW      X13, X12, X15

// Q4KR: one Q4_K super-block of the row at DX into acc and accm.
#define Q4KR(acc, accm) \
	KSC4 \
	KMIN4(accm) \
	VPERMQ     $0x44, Y7, Y7 \
	VMOVDQU    16(DX), Y4 \
	VPSRLW     $4, Y4, Y5 \
	VPAND      Y14, Y4, Y4 \
	VPAND      Y14, Y5, Y5 \
	VPSHUFB    r4kshuf<>+0(SB), Y7, Y6 \
	VPSHUFB    r4kshuf<>+32(SB), Y7, Y13 \
	VPMADDUBSW 4(DI), Y4, Y4 \
	VPMADDWD   Y6, Y4, Y4 \
	VPMADDUBSW 36(DI), Y5, Y5 \
	VPMADDWD   Y13, Y5, Y5 \
	VPADDD     Y5, Y4, Y12 \
	VMOVDQU    48(DX), Y4 \
	VPSRLW     $4, Y4, Y5 \
	VPAND      Y14, Y4, Y4 \
	VPAND      Y14, Y5, Y5 \
	VPSHUFB    r4kshuf<>+64(SB), Y7, Y6 \
	VPSHUFB    r4kshuf<>+96(SB), Y7, Y13 \
	VPMADDUBSW 68(DI), Y4, Y4 \
	VPMADDWD   Y6, Y4, Y4 \
	VPMADDUBSW 100(DI), Y5, Y5 \
	VPMADDWD   Y13, Y5, Y5 \
	VPADDD     Y5, Y4, Y4 \
	VPADDD     Y4, Y12, Y12 \
	VMOVDQU    80(DX), Y4 \
	VPSRLW     $4, Y4, Y5 \
	VPAND      Y14, Y4, Y4 \
	VPAND      Y14, Y5, Y5 \
	VPSHUFB    r4kshuf<>+128(SB), Y7, Y6 \
	VPSHUFB    r4kshuf<>+160(SB), Y7, Y13 \
	VPMADDUBSW 132(DI), Y4, Y4 \
	VPMADDWD   Y6, Y4, Y4 \
	VPMADDUBSW 164(DI), Y5, Y5 \
	VPMADDWD   Y13, Y5, Y5 \
	VPADDD     Y5, Y4, Y4 \
	VPADDD     Y4, Y12, Y12 \
	VMOVDQU    112(DX), Y4 \
	VPSRLW     $4, Y4, Y5 \
	VPAND      Y14, Y4, Y4 \
	VPAND      Y14, Y5, Y5 \
	VPSHUFB    r4kshuf<>+192(SB), Y7, Y6 \
	VPSHUFB    r4kshuf<>+224(SB), Y7, Y13 \
	VPMADDUBSW 196(DI), Y4, Y4 \
	VPMADDWD   Y6, Y4, Y4 \
	VPMADDUBSW 228(DI), Y5, Y5 \
	VPMADDWD   Y13, Y5, Y5 \
	VPADDD     Y5, Y4, Y4 \
	VPADDD     Y4, Y12, Y12 \
	KDFMA(acc)

// Q5KR: one Q5_K super-block of the row at DX into acc and the scalar
// accm (Y10 = bytes 0x10, Y6 = qh).
#define Q5KR(acc, accm) \
	KSC4 \
	KMIN5(accm) \
	VPERMQ     $0x44, Y7, Y7 \
	VMOVDQU    16(DX), Y6 \
	VMOVDQU    48(DX), Y4 \
	VPSRLW     $4, Y4, Y5 \
	VPAND      Y14, Y4, Y4 \
	VPAND      Y14, Y5, Y5 \
	VPSLLW     $4, Y6, Y9 \
	VPAND      Y10, Y9, Y9 \
	VPOR       Y9, Y4, Y4 \
	VPSLLW     $3, Y6, Y9 \
	VPAND      Y10, Y9, Y9 \
	VPOR       Y9, Y5, Y5 \
	VPSHUFB    r4kshuf<>+0(SB), Y7, Y8 \
	VPSHUFB    r4kshuf<>+32(SB), Y7, Y13 \
	VPMADDUBSW 4(DI), Y4, Y4 \
	VPMADDWD   Y8, Y4, Y4 \
	VPMADDUBSW 36(DI), Y5, Y5 \
	VPMADDWD   Y13, Y5, Y5 \
	VPADDD     Y5, Y4, Y12 \
	VMOVDQU    80(DX), Y4 \
	VPSRLW     $4, Y4, Y5 \
	VPAND      Y14, Y4, Y4 \
	VPAND      Y14, Y5, Y5 \
	VPSLLW     $2, Y6, Y9 \
	VPAND      Y10, Y9, Y9 \
	VPOR       Y9, Y4, Y4 \
	VPSLLW     $1, Y6, Y9 \
	VPAND      Y10, Y9, Y9 \
	VPOR       Y9, Y5, Y5 \
	VPSHUFB    r4kshuf<>+64(SB), Y7, Y8 \
	VPSHUFB    r4kshuf<>+96(SB), Y7, Y13 \
	VPMADDUBSW 68(DI), Y4, Y4 \
	VPMADDWD   Y8, Y4, Y4 \
	VPMADDUBSW 100(DI), Y5, Y5 \
	VPMADDWD   Y13, Y5, Y5 \
	VPADDD     Y5, Y4, Y4 \
	VPADDD     Y4, Y12, Y12 \
	VMOVDQU    112(DX), Y4 \
	VPSRLW     $4, Y4, Y5 \
	VPAND      Y14, Y4, Y4 \
	VPAND      Y14, Y5, Y5 \
	VPAND      Y10, Y6, Y9 \
	VPOR       Y9, Y4, Y4 \
	VPSRLW     $1, Y6, Y9 \
	VPAND      Y10, Y9, Y9 \
	VPOR       Y9, Y5, Y5 \
	VPSHUFB    r4kshuf<>+128(SB), Y7, Y8 \
	VPSHUFB    r4kshuf<>+160(SB), Y7, Y13 \
	VPMADDUBSW 132(DI), Y4, Y4 \
	VPMADDWD   Y8, Y4, Y4 \
	VPMADDUBSW 164(DI), Y5, Y5 \
	VPMADDWD   Y13, Y5, Y5 \
	VPADDD     Y5, Y4, Y4 \
	VPADDD     Y4, Y12, Y12 \
	VMOVDQU    144(DX), Y4 \
	VPSRLW     $4, Y4, Y5 \
	VPAND      Y14, Y4, Y4 \
	VPAND      Y14, Y5, Y5 \
	VPSRLW     $2, Y6, Y9 \
	VPAND      Y10, Y9, Y9 \
	VPOR       Y9, Y4, Y4 \
	VPSRLW     $3, Y6, Y9 \
	VPAND      Y10, Y9, Y9 \
	VPOR       Y9, Y5, Y5 \
	VPSHUFB    r4kshuf<>+192(SB), Y7, Y8 \
	VPSHUFB    r4kshuf<>+224(SB), Y7, Y13 \
	VPMADDUBSW 196(DI), Y4, Y4 \
	VPMADDWD   Y8, Y4, Y4 \
	VPMADDUBSW 228(DI), Y5, Y5 \
	VPMADDWD   Y13, Y5, Y5 \
	VPADDD     Y5, Y4, Y4 \
	VPADDD     Y4, Y12, Y12 \
	KDFMA(acc)

// Q6KR: one Q6_K super-block of the row at DX into acc (Y14 bytes 0x0F,
// Y15 bytes 0x30, 32·a pairs of the eight groups at 0(SP)).
#define Q6KR(acc) \
	VMOVDQU    192(DX), X7 \
	VMOVDQU    0(DX), Y4 \
	VMOVDQU    32(DX), Y5 \
	VMOVDQU    128(DX), Y6 \
	VPAND      Y14, Y4, Y8 \
	VPSLLW     $4, Y6, Y9 \
	VPAND      Y15, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    r4q6shuf<>+0(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 4(DI), Y8, Y8 \
	VPSUBW     0(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VMOVDQA    Y8, Y12 \
	VPAND      Y14, Y5, Y8 \
	VPSLLW     $2, Y6, Y9 \
	VPAND      Y15, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    r4q6shuf<>+16(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 36(DI), Y8, Y8 \
	VPSUBW     32(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y12, Y12 \
	VPSRLW     $4, Y4, Y8 \
	VPAND      Y14, Y8, Y8 \
	VPAND      Y15, Y6, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    r4q6shuf<>+32(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 68(DI), Y8, Y8 \
	VPSUBW     64(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y12, Y12 \
	VPSRLW     $4, Y5, Y8 \
	VPAND      Y14, Y8, Y8 \
	VPSRLW     $2, Y6, Y9 \
	VPAND      Y15, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    r4q6shuf<>+48(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 100(DI), Y8, Y8 \
	VPSUBW     96(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y12, Y12 \
	VMOVDQU    64(DX), Y4 \
	VMOVDQU    96(DX), Y5 \
	VMOVDQU    160(DX), Y6 \
	VPAND      Y14, Y4, Y8 \
	VPSLLW     $4, Y6, Y9 \
	VPAND      Y15, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    r4q6shuf<>+64(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 132(DI), Y8, Y8 \
	VPSUBW     128(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y12, Y12 \
	VPAND      Y14, Y5, Y8 \
	VPSLLW     $2, Y6, Y9 \
	VPAND      Y15, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    r4q6shuf<>+80(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 164(DI), Y8, Y8 \
	VPSUBW     160(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y12, Y12 \
	VPSRLW     $4, Y4, Y8 \
	VPAND      Y14, Y8, Y8 \
	VPAND      Y15, Y6, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    r4q6shuf<>+96(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 196(DI), Y8, Y8 \
	VPSUBW     192(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y12, Y12 \
	VPSRLW     $4, Y5, Y8 \
	VPAND      Y14, Y8, Y8 \
	VPSRLW     $2, Y6, Y9 \
	VPAND      Y15, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    r4q6shuf<>+112(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 228(DI), Y8, Y8 \
	VPSUBW     224(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y12, Y12 \
	VCVTDQ2PS    Y12, Y12 \
	VPBROADCASTW 208(DX), X13 \
	VCVTPH2PS    X13, X13 \
	VMULSS       (DI), X13, X13 \
	VBROADCASTSS X13, Y13 \
	VFMADD231PS  Y12, Y13, acc

// Q6A: the 32·a int16 pairs of the eight 32-value groups to 0(SP) (Y11
// bytes 0x20).
#define Q6A \
	VPMADDUBSW 4(DI), Y11, Y8 \
	VMOVDQU    Y8, 0(SP) \
	VPMADDUBSW 36(DI), Y11, Y8 \
	VMOVDQU    Y8, 32(SP) \
	VPMADDUBSW 68(DI), Y11, Y8 \
	VMOVDQU    Y8, 64(SP) \
	VPMADDUBSW 100(DI), Y11, Y8 \
	VMOVDQU    Y8, 96(SP) \
	VPMADDUBSW 132(DI), Y11, Y8 \
	VMOVDQU    Y8, 128(SP) \
	VPMADDUBSW 164(DI), Y11, Y8 \
	VMOVDQU    Y8, 160(SP) \
	VPMADDUBSW 196(DI), Y11, Y8 \
	VMOVDQU    Y8, 192(SP) \
	VPMADDUBSW 228(DI), Y11, Y8 \
	VMOVDQU    Y8, 224(SP)

// ---- loops ------------------------------------------------------------------

// func dotR4Q4_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q4_KAVX2(SB), NOSPLIT, $0-88
	ARGSK4(8)
	BCASTD($0x0f0f0f0f, X14, Y14)
	VXORPS X8, X8, X8
	VXORPS X9, X9, X9
	VXORPS X10, X10, X10
	VXORPS X11, X11, X11
	TESTQ CX, CX
	JZ    r4q4kdone

r4q4kloop:
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ $576, R13
	BSUMS
	ROW0
	Q4KR(Y0, X8)
	ROW1
	Q4KR(Y1, X9)
	ROW2
	Q4KR(Y2, X10)
	ROW3
	Q4KR(Y3, X11)
	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  r4q4kloop

r4q4kdone:
	MOVQ out_base+64(FP), AX
	HSUMX(Y0, X0, X12)
	RED4(X8, X12)
	VADDSS X8, X0, X0
	VMOVSS X0, (AX)
	HSUMX(Y1, X1, X12)
	RED4(X9, X12)
	VADDSS X9, X1, X1
	VMOVSS X1, 4(AX)
	HSUMX(Y2, X2, X12)
	RED4(X10, X12)
	VADDSS X10, X2, X2
	VMOVSS X2, 8(AX)
	HSUMX(Y3, X3, X12)
	RED4(X11, X12)
	VADDSS X11, X3, X3
	VMOVSS X3, 12(AX)
	VZEROUPPER
	RET

// func dotR4Q5_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q5_KAVX2(SB), NOSPLIT, $16-88
	ARGSK4(8)
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x10101010, X10, Y10)
	VXORPS X11, X11, X11
	VMOVUPS X11, 0(SP)
	TESTQ CX, CX
	JZ    r4q5kdone

r4q5kloop:
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	PREFETCHT0 576(R13)
	PREFETCHT0 640(R13)
	ADDQ $704, R13
	BSUMS
	ROW0
	VMOVSS 0(SP), X11
	Q5KR(Y0, X11)
	VMOVSS X11, 0(SP)
	ROW1
	VMOVSS 4(SP), X11
	Q5KR(Y1, X11)
	VMOVSS X11, 4(SP)
	ROW2
	VMOVSS 8(SP), X11
	Q5KR(Y2, X11)
	VMOVSS X11, 8(SP)
	ROW3
	VMOVSS 12(SP), X11
	Q5KR(Y3, X11)
	VMOVSS X11, 12(SP)
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  r4q5kloop

r4q5kdone:
	MOVQ out_base+64(FP), AX
	HSUMX(Y0, X0, X12)
	VADDSS 0(SP), X0, X0
	VMOVSS X0, (AX)
	HSUMX(Y1, X1, X12)
	VADDSS 4(SP), X1, X1
	VMOVSS X1, 4(AX)
	HSUMX(Y2, X2, X12)
	VADDSS 8(SP), X2, X2
	VMOVSS X2, 8(AX)
	HSUMX(Y3, X3, X12)
	VADDSS 12(SP), X3, X3
	VMOVSS X3, 12(AX)
	VZEROUPPER
	RET

// func dotR4Q6_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q6_KAVX2(SB), NOSPLIT, $256-88
	ARGSK4(8)
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x30303030, X15, Y15)
	BCASTD($0x20202020, X11, Y11)
	TESTQ CX, CX
	JZ    r4q6kdone

r4q6kloop:
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	PREFETCHT0 576(R13)
	PREFETCHT0 640(R13)
	PREFETCHT0 704(R13)
	PREFETCHT0 768(R13)
	PREFETCHT0 832(R13)
	ADDQ $840, R13
	Q6A
	ROW0
	Q6KR(Y0)
	ROW1
	Q6KR(Y1)
	ROW2
	Q6KR(Y2)
	ROW3
	Q6KR(Y3)
	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  r4q6kloop

r4q6kdone:
	STORER4
	VZEROUPPER
	RET

// ---- float types: n a multiple of 8 (the Go wrappers add the tails) ---------

// func dotR4F32AVX2Main(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4F32AVX2Main(SB), NOSPLIT, $0-88
	ARGSK4(3)
	TESTQ CX, CX
	JZ    r4f32done

r4f32loop:
	PREFETCHT0  (R13)
	PREFETCHT0  64(R13)
	ADDQ        $128, R13
	VMOVUPS     (DI), Y4
	VFMADD231PS (SI), Y4, Y0
	VFMADD231PS (SI)(R8*1), Y4, Y1
	VFMADD231PS (SI)(R8*2), Y4, Y2
	VFMADD231PS (SI)(R9*1), Y4, Y3
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  r4f32loop

r4f32done:
	STORER4
	VZEROUPPER
	RET

// func dotR4F16AVX2Main(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4F16AVX2Main(SB), NOSPLIT, $0-88
	ARGSK4(3)
	TESTQ CX, CX
	JZ    r4f16done

r4f16loop:
	PREFETCHT0  (R13)
	ADDQ        $64, R13
	VCVTPH2PS   (DI), Y4
	VCVTPH2PS   (SI), Y5
	VFMADD231PS Y4, Y5, Y0
	VCVTPH2PS   (SI)(R8*1), Y6
	VFMADD231PS Y4, Y6, Y1
	VCVTPH2PS   (SI)(R8*2), Y7
	VFMADD231PS Y4, Y7, Y2
	VCVTPH2PS   (SI)(R9*1), Y8
	VFMADD231PS Y4, Y8, Y3
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  r4f16loop

r4f16done:
	STORER4
	VZEROUPPER
	RET


// func dotR4BF16AVX2Main(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4BF16AVX2Main(SB), NOSPLIT, $0-88
	ARGSK4(3)
	TESTQ CX, CX
	JZ    r4bf16done

r4bf16loop:
	PREFETCHT0  (R13)
	ADDQ        $64, R13
	BF16LOAD((DI), Y4)
	BF16LOAD((SI), Y5)
	VFMADD231PS Y4, Y5, Y0
	BF16LOAD((SI)(R8*1), Y6)
	VFMADD231PS Y4, Y6, Y1
	BF16LOAD((SI)(R8*2), Y7)
	VFMADD231PS Y4, Y7, Y2
	BF16LOAD((SI)(R9*1), Y8)
	VFMADD231PS Y4, Y8, Y3
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  r4bf16loop

r4bf16done:
	STORER4
	VZEROUPPER
	RET


DATA r4kshuf<>+0(SB)/8, $0x100010001000100
DATA r4kshuf<>+8(SB)/8, $0x100010001000100
DATA r4kshuf<>+16(SB)/8, $0x100010001000100
DATA r4kshuf<>+24(SB)/8, $0x100010001000100
DATA r4kshuf<>+32(SB)/8, $0x302030203020302
DATA r4kshuf<>+40(SB)/8, $0x302030203020302
DATA r4kshuf<>+48(SB)/8, $0x302030203020302
DATA r4kshuf<>+56(SB)/8, $0x302030203020302
DATA r4kshuf<>+64(SB)/8, $0x504050405040504
DATA r4kshuf<>+72(SB)/8, $0x504050405040504
DATA r4kshuf<>+80(SB)/8, $0x504050405040504
DATA r4kshuf<>+88(SB)/8, $0x504050405040504
DATA r4kshuf<>+96(SB)/8, $0x706070607060706
DATA r4kshuf<>+104(SB)/8, $0x706070607060706
DATA r4kshuf<>+112(SB)/8, $0x706070607060706
DATA r4kshuf<>+120(SB)/8, $0x706070607060706
DATA r4kshuf<>+128(SB)/8, $0x908090809080908
DATA r4kshuf<>+136(SB)/8, $0x908090809080908
DATA r4kshuf<>+144(SB)/8, $0x908090809080908
DATA r4kshuf<>+152(SB)/8, $0x908090809080908
DATA r4kshuf<>+160(SB)/8, $0xb0a0b0a0b0a0b0a
DATA r4kshuf<>+168(SB)/8, $0xb0a0b0a0b0a0b0a
DATA r4kshuf<>+176(SB)/8, $0xb0a0b0a0b0a0b0a
DATA r4kshuf<>+184(SB)/8, $0xb0a0b0a0b0a0b0a
DATA r4kshuf<>+192(SB)/8, $0xd0c0d0c0d0c0d0c
DATA r4kshuf<>+200(SB)/8, $0xd0c0d0c0d0c0d0c
DATA r4kshuf<>+208(SB)/8, $0xd0c0d0c0d0c0d0c
DATA r4kshuf<>+216(SB)/8, $0xd0c0d0c0d0c0d0c
DATA r4kshuf<>+224(SB)/8, $0xf0e0f0e0f0e0f0e
DATA r4kshuf<>+232(SB)/8, $0xf0e0f0e0f0e0f0e
DATA r4kshuf<>+240(SB)/8, $0xf0e0f0e0f0e0f0e
DATA r4kshuf<>+248(SB)/8, $0xf0e0f0e0f0e0f0e
GLOBL r4kshuf<>(SB), RODATA|NOPTR, $256
DATA r4q6shuf<>+0(SB)/8, $0x0
DATA r4q6shuf<>+8(SB)/8, $0x101010101010101
DATA r4q6shuf<>+16(SB)/8, $0x202020202020202
DATA r4q6shuf<>+24(SB)/8, $0x303030303030303
DATA r4q6shuf<>+32(SB)/8, $0x404040404040404
DATA r4q6shuf<>+40(SB)/8, $0x505050505050505
DATA r4q6shuf<>+48(SB)/8, $0x606060606060606
DATA r4q6shuf<>+56(SB)/8, $0x707070707070707
DATA r4q6shuf<>+64(SB)/8, $0x808080808080808
DATA r4q6shuf<>+72(SB)/8, $0x909090909090909
DATA r4q6shuf<>+80(SB)/8, $0xa0a0a0a0a0a0a0a
DATA r4q6shuf<>+88(SB)/8, $0xb0b0b0b0b0b0b0b
DATA r4q6shuf<>+96(SB)/8, $0xc0c0c0c0c0c0c0c
DATA r4q6shuf<>+104(SB)/8, $0xd0d0d0d0d0d0d0d
DATA r4q6shuf<>+112(SB)/8, $0xe0e0e0e0e0e0e0e
DATA r4q6shuf<>+120(SB)/8, $0xf0f0f0f0f0f0f0f
GLOBL r4q6shuf<>(SB), RODATA|NOPTR, $128
