//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// The 256-value super-block types against Q8_K (float32 d at 0, int8 qs at
// 4, int16 bsums at 260): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS. Single-row
// kernels dot<T>AVX2 and four-row kernels dot4<T>AVX2 give each row the same
// float32 operations in the same order, which is ggml-cpu's AVX2 vec_dot
// order:
//
//   - the super-block's int32 sums sit in eight lanes, each lane the
//     contributions of 4 consecutive values of every 32-value group (scale
//     applied by VPMADDWD), offsets folded in per int16 lane exactly as ggml
//     does (Q6_K's −32, Q3_K's −4: here by the VPSIGNB trick on q − offset,
//     which gives the same int16 lanes);
//   - per super-block acc = fma(d_w·d_a, float(lanes), acc); Q2_K first adds
//     fma(−dmin, float(Σ min·bsum lanes), acc); Q4_K keeps the mins in a
//     four-lane accumulator and Q5_K in a scalar one, added after
//     hsum_float_8 as ggml does.
//
// Registers (four-row kernels): SI weights, DI activations of row 0, R8
// stride, R9 3·stride, CX super-blocks, Y0..Y3 row accumulators, Y8..Y11
// row int32 sums. Decoded int16 scales at 0(SP). Every macro precedes the
// first TEXT.

#define BCASTD(v, x, y) MOVL v, BX; VMOVD BX, x; VPBROADCASTD x, y



#define ARGS1 \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ a_base+32(FP), DI     \
	XORQ R8, R8                \
	XORQ R9, R9                \
	SHRQ $8, CX                \
	VXORPS Y0, Y0, Y0

#define ARGS4 \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ a_base+32(FP), DI     \
	MOVQ stride+56(FP), R8     \
	LEAQ (R8)(R8*2), R9        \
	SHRQ $8, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3


#define ZERO4 \
	VPXOR Y8, Y8, Y8           \
	VPXOR Y9, Y9, Y9           \
	VPXOR Y10, Y10, Y10        \
	VPXOR Y11, Y11, Y11

// DFMA: acc = fma(dw·d_a, float(sum), acc), d_a the row's float32 at dA, Y15 = d_w.
#define DFMA(dA, sum, acc) \
	VCVTDQ2PS    sum, sum      \
	VBROADCASTSS dA, Y13       \
	VMULPS       Y15, Y13, Y13 \
	VFMADD231PS  sum, Y13, acc

#define DFMA4 \
	DFMA((DI), Y8, Y0)                 \
	DFMA((DI)(R8*1), Y9, Y1)           \
	DFMA((DI)(R8*2), Y10, Y2)          \
	DFMA((DI)(R9*1), Y11, Y3)

// WD(off) sets Y15 to the fp16 weight scale at off(SI).
#define WD(off) VPBROADCASTW off(SI), X15; VCVTPH2PS X15, Y15




#define SROWS4(o) \
	SROW(o(DI), Y8)            \
	SROW(o(DI)(R8*1), Y9)      \
	SROW(o(DI)(R8*2), Y10)     \
	SROW(o(DI)(R9*1), Y11)

// UROW: sum += madd(scale, maddubs(q (unsigned, in reg), a)).
#define UROW(a, q, scale, sum) \
	VPMADDUBSW a, q, Y13       \
	VPMADDWD   scale, Y13, Y13 \
	VPADDD     Y13, sum, sum

// ---- Q4_K / Q5_K --------------------------------------------------------------
// Scales decoded to 16 int16 at 0(SP) (8 scales, 8 mins); per-row min
// accumulators in the frame: Q4_K four lanes at 32+16r(SP), Q5_K a scalar at
// 32+4r(SP).

#define KSCALES \
	MOVL 4(SI), R10              \
	MOVL 8(SI), R11              \
	MOVL 12(SI), R12             \
	MOVL R12, AX                 \
	SHRL $4, AX                  \
	ANDL $0x0f0f0f0f, AX         \
	MOVL R11, BX                 \
	SHRL $6, BX                  \
	ANDL $0x03030303, BX         \
	SHLL $4, BX                  \
	ORL  BX, AX                  \
	MOVL R11, BX                 \
	ANDL $0x3f3f3f3f, BX         \
	MOVL R12, DX                 \
	ANDL $0x0f0f0f0f, DX         \
	MOVL R10, R13                \
	SHRL $6, R13                 \
	ANDL $0x03030303, R13        \
	SHLL $4, R13                 \
	ORL  R13, DX                 \
	ANDL $0x3f3f3f3f, R10        \
	VMOVD   R10, X7              \
	VPINSRD $1, DX, X7, X7       \
	VPINSRD $2, BX, X7, X7       \
	VPINSRD $3, AX, X7, X7       \
	VPMOVZXBW X7, Y7             \
	VMOVDQU Y7, 0(SP)

// KPROD leaves in X12 the four int32 lanes madd(mins, hadd(bsums)) of the
// row whose Q8_K bsums are at b.
#define KPROD(b) \
	VMOVDQU      b, Y12          \
	VEXTRACTI128 $1, Y12, X13    \
	VPHADDW      X13, X12, X12   \
	VPMADDWD     16(SP), X12, X12

// Q4KMIN: acc_m = fma(−dmin_w·d_a, float(prod), acc_m), 4 lanes (X6 = dmin_w).
#define Q4KMIN(a, b, m) \
	KPROD(b)                     \
	VCVTDQ2PS    X12, X12        \
	VBROADCASTSS a, X13          \
	VMULPS       X6, X13, X13    \
	VMOVUPS      m, X7           \
	VFNMADD231PS X12, X13, X7    \
	VMOVUPS      X7, m

// Q5KMIN: summs = fma(−dmin_w·d_a, float(Σ prod), summs), scalar.
#define Q5KMIN(a, b, m) \
	KPROD(b)                     \
	VPSHUFD      $0x4e, X12, X13 \
	VPADDD       X13, X12, X12   \
	VPSHUFD      $0xb1, X12, X13 \
	VPADDD       X13, X12, X12   \
	VCVTDQ2PS    X12, X12        \
	VMOVSS       a, X13          \
	VMULSS       X6, X13, X13    \
	VMOVSS       m, X7           \
	VFNMADD231SS X12, X13, X7    \
	VMOVSS       X7, m

#define DMINW VPBROADCASTW 2(SI), X6; VCVTPH2PS X6, X6

// Q4KCHUNK unpacks 64 values (low nibbles → Y4, high → Y5) and their two
// scales (Y6, Y7) for UROW.
#define Q4KCHUNK(q, s0, s1) \
	VMOVDQU      q, Y4           \
	VPSRLW       $4, Y4, Y5      \
	VPAND        Y14, Y4, Y4     \
	VPAND        Y14, Y5, Y5     \
	VPBROADCASTW s0, Y6          \
	VPBROADCASTW s1, Y7

// Q5KCHUNK: Q4KCHUNK plus bit 4 from the next two planes of qh (at 16(SI));
// bit is the plane of the low half.
#define Q5KCHUNK(q, bit) \
	VMOVDQU      q, Y4           \
	VPSRLW       $4, Y4, Y5      \
	VPAND        Y14, Y4, Y4     \
	VPAND        Y14, Y5, Y5     \
	VMOVDQU      16(SI), Y6      \
	VPSRLW       $bit, Y6, Y6    \
	VPAND        bytes01<>(SB), Y6, Y7 \
	VPSLLW       $4, Y7, Y7      \
	VPOR         Y7, Y4, Y4      \
	VPSRLW       $1, Y6, Y6      \
	VPAND        bytes01<>(SB), Y6, Y7 \
	VPSLLW       $4, Y7, Y7      \
	VPOR         Y7, Y5, Y5

#define KSC(s0, s1) VPBROADCASTW s0, Y6; VPBROADCASTW s1, Y7

#define KROW(o, sum) \
	UROW(o(DI), Y4, Y6, sum)     \
	UROW(o+32(DI), Y5, Y7, sum)

#define KROW4(o) \
	UROW(o(DI), Y4, Y6, Y8)                  \
	UROW(o+32(DI), Y5, Y7, Y8)               \
	UROW(o(DI)(R8*1), Y4, Y6, Y9)            \
	UROW(o+32(DI)(R8*1), Y5, Y7, Y9)         \
	UROW(o(DI)(R8*2), Y4, Y6, Y10)           \
	UROW(o+32(DI)(R8*2), Y5, Y7, Y10)        \
	UROW(o(DI)(R9*1), Y4, Y6, Y11)           \
	UROW(o+32(DI)(R9*1), Y5, Y7, Y11)

// ---- Q6_K ----------------------------------------------------------------------
// Per 32-value group: w = (4 low bits | 2 high bits << 4) − 32 in Y4, |w| in
// Y5, the scale pair in Y12; ql at q, qh plane from Y7 (shifted 2 per group).

#define Q6W(q, shift) \
	VMOVDQU  q, Y4               \
	VPSRLW   $shift, Y4, Y4      \
	VPAND    Y14, Y4, Y4         \
	VPAND    Y15, Y7, Y5         \
	VPSLLW   $4, Y5, Y5          \
	VPOR     Y5, Y4, Y4          \
	VPSRLW   $2, Y7, Y7          \
	VPSUBB   bytes20<>(SB), Y4, Y4 \
	VPSIGNB  Y4, Y4, Y5

// ---- Q3_K ----------------------------------------------------------------------
// w = (2 low bits | hmask bit << 2) − 4; hmask planes from Y7 (one per group).


#define Q3SCALES \
	MOVL 96(SI), R10             \
	MOVL 100(SI), R11            \
	MOVL 104(SI), R12            \
	MOVL R10, AX                 \
	ANDL $0x0f0f0f0f, AX         \
	MOVL R12, BX                 \
	ANDL $0x03030303, BX         \
	SHLL $4, BX                  \
	ORL  BX, AX                  \
	VMOVD AX, X7                 \
	MOVL R11, AX                 \
	ANDL $0x0f0f0f0f, AX         \
	MOVL R12, BX                 \
	SHRL $2, BX                  \
	ANDL $0x03030303, BX         \
	SHLL $4, BX                  \
	ORL  BX, AX                  \
	VPINSRD $1, AX, X7, X7       \
	MOVL R10, AX                 \
	SHRL $4, AX                  \
	ANDL $0x0f0f0f0f, AX         \
	MOVL R12, BX                 \
	SHRL $4, BX                  \
	ANDL $0x03030303, BX         \
	SHLL $4, BX                  \
	ORL  BX, AX                  \
	VPINSRD $2, AX, X7, X7       \
	MOVL R11, AX                 \
	SHRL $4, AX                  \
	ANDL $0x0f0f0f0f, AX         \
	MOVL R12, BX                 \
	SHRL $6, BX                  \
	ANDL $0x03030303, BX         \
	SHLL $4, BX                  \
	ORL  BX, AX                  \
	VPINSRD $3, AX, X7, X7       \
	VPSUBB  bytes20<>(SB), X7, X7 \
	VPMOVSXBW X7, Y7             \
	VMOVDQU Y7, 0(SP)

// ---- Q2_K ----------------------------------------------------------------------
// Scales: 16 int16 at 0(SP), mins 16 int16 at 32(SP).

#define Q2SCALES \
	VPMOVZXBW 0(SI), Y12         \
	VPSRLW    $4, Y12, Y13       \
	VPAND     words0F<>(SB), Y12, Y12 \
	VMOVDQU   Y12, 0(SP)         \
	VMOVDQU   Y13, 32(SP)        \
	VPBROADCASTW 82(SI), X6      \
	VCVTPH2PS X6, Y6



// ---- IQ4_XS --------------------------------------------------------------------


#define XSSCALES \
	MOVL    4(SI), R10             \
	MOVWLZX 2(SI), R11             \
	XSLS(0, 0, 0)                  \
	XSLS(4, 2, 2)                  \
	XSLS(8, 4, 4)                  \
	XSLS(12, 6, 6)                 \
	XSLS(16, 8, 8)                 \
	XSLS(20, 10, 10)               \
	XSLS(24, 12, 12)               \
	XSLS(28, 14, 14)


// ==== Q4_K =====================================================================

// func dotQ4_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $48-60
	ARGS1
	BCASTD($0x0f0f0f0f, X14, Y14)
	VXORPS X7, X7, X7
	VMOVUPS X7, 32(SP)
	TESTQ CX, CX
	JZ    q4kdone

q4kloop:
	KSCALES
	DMINW
	Q4KMIN((DI), 260(DI), 32(SP))
	VPXOR Y8, Y8, Y8
	Q4KCHUNK(16(SI), 0(SP), 2(SP))
	KROW(4, Y8)
	Q4KCHUNK(48(SI), 4(SP), 6(SP))
	KROW(68, Y8)
	Q4KCHUNK(80(SI), 8(SP), 10(SP))
	KROW(132, Y8)
	Q4KCHUNK(112(SI), 12(SP), 14(SP))
	KROW(196, Y8)
	WD(0)
	DFMA((DI), Y8, Y0)
	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q4kloop

q4kdone:
	HSUMX(Y0, X0, X1)
	VMOVUPS 32(SP), X2
	RED4(X2, X1)
	VADDSS X2, X0, X0
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4Q4_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4Q4_KAVX2(SB), NOSPLIT, $96-96
	ARGS4
	BCASTD($0x0f0f0f0f, X14, Y14)
	VXORPS Y7, Y7, Y7
	VMOVUPS Y7, 32(SP)
	VMOVUPS Y7, 64(SP)
	TESTQ CX, CX
	JZ    q4k4done

q4k4loop:
	KSCALES
	DMINW
	Q4KMIN((DI), 260(DI), 32(SP))
	Q4KMIN((DI)(R8*1), 260(DI)(R8*1), 48(SP))
	Q4KMIN((DI)(R8*2), 260(DI)(R8*2), 64(SP))
	Q4KMIN((DI)(R9*1), 260(DI)(R9*1), 80(SP))
	ZERO4
	Q4KCHUNK(16(SI), 0(SP), 2(SP))
	KROW4(4)
	Q4KCHUNK(48(SI), 4(SP), 6(SP))
	KROW4(68)
	Q4KCHUNK(80(SI), 8(SP), 10(SP))
	KROW4(132)
	Q4KCHUNK(112(SI), 12(SP), 14(SP))
	KROW4(196)
	WD(0)
	DFMA4
	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q4k4loop

q4k4done:
	STORE4
	VMOVUPS 32(SP), X4
	RED4(X4, X5)
	VADDSS (AX), X4, X4
	VMOVSS X4, (AX)
	VMOVUPS 48(SP), X4
	RED4(X4, X5)
	VADDSS (AX)(R12*1), X4, X4
	VMOVSS X4, (AX)(R12*1)
	VMOVUPS 64(SP), X4
	RED4(X4, X5)
	VADDSS (AX)(R12*2), X4, X4
	VMOVSS X4, (AX)(R12*2)
	VMOVUPS 80(SP), X4
	RED4(X4, X5)
	VADDSS (AX)(R13*1), X4, X4
	VMOVSS X4, (AX)(R13*1)
	VZEROUPPER
	RET

// ==== Q5_K =====================================================================

// func dotQ5_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $48-60
	ARGS1
	BCASTD($0x0f0f0f0f, X14, Y14)
	VXORPS X7, X7, X7
	VMOVUPS X7, 32(SP)
	TESTQ CX, CX
	JZ    q5kdone

q5kloop:
	KSCALES
	DMINW
	Q5KMIN((DI), 260(DI), 32(SP))
	VPXOR Y8, Y8, Y8
	Q5KCHUNK(48(SI), 0)
	KSC(0(SP), 2(SP))
	KROW(4, Y8)
	Q5KCHUNK(80(SI), 2)
	KSC(4(SP), 6(SP))
	KROW(68, Y8)
	Q5KCHUNK(112(SI), 4)
	KSC(8(SP), 10(SP))
	KROW(132, Y8)
	Q5KCHUNK(144(SI), 6)
	KSC(12(SP), 14(SP))
	KROW(196, Y8)
	WD(0)
	DFMA((DI), Y8, Y0)
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q5kloop

q5kdone:
	HSUMX(Y0, X0, X1)
	VADDSS 32(SP), X0, X0
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4Q5_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4Q5_KAVX2(SB), NOSPLIT, $64-96
	ARGS4
	BCASTD($0x0f0f0f0f, X14, Y14)
	VXORPS X7, X7, X7
	VMOVUPS X7, 32(SP)
	TESTQ CX, CX
	JZ    q5k4done

q5k4loop:
	KSCALES
	DMINW
	Q5KMIN((DI), 260(DI), 32(SP))
	Q5KMIN((DI)(R8*1), 260(DI)(R8*1), 36(SP))
	Q5KMIN((DI)(R8*2), 260(DI)(R8*2), 40(SP))
	Q5KMIN((DI)(R9*1), 260(DI)(R9*1), 44(SP))
	ZERO4
	Q5KCHUNK(48(SI), 0)
	KSC(0(SP), 2(SP))
	KROW4(4)
	Q5KCHUNK(80(SI), 2)
	KSC(4(SP), 6(SP))
	KROW4(68)
	Q5KCHUNK(112(SI), 4)
	KSC(8(SP), 10(SP))
	KROW4(132)
	Q5KCHUNK(144(SI), 6)
	KSC(12(SP), 14(SP))
	KROW4(196)
	WD(0)
	DFMA4
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q5k4loop

q5k4done:
	STORE4
	VMOVSS (AX), X4
	VADDSS 32(SP), X4, X4
	VMOVSS X4, (AX)
	VMOVSS (AX)(R12*1), X4
	VADDSS 36(SP), X4, X4
	VMOVSS X4, (AX)(R12*1)
	VMOVSS (AX)(R12*2), X4
	VADDSS 40(SP), X4, X4
	VMOVSS X4, (AX)(R12*2)
	VMOVSS (AX)(R13*1), X4
	VADDSS 44(SP), X4, X4
	VMOVSS X4, (AX)(R13*1)
	VZEROUPPER
	RET

// ==== Q6_K =====================================================================

// func dotQ6_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $32-60
	ARGS1
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x03030303, X15, Y15)
	TESTQ CX, CX
	JZ    q6kdone

q6kloop:
	VPMOVSXBW 192(SI), Y7
	VMOVDQU   Y7, 0(SP)
	VPXOR     Y8, Y8, Y8
	VMOVDQU   128(SI), Y7
	Q6W(0(SI), 0)
	PAIR(0(SP), 2(SP))
	SROWS1(4)
	Q6W(32(SI), 0)
	PAIR(4(SP), 6(SP))
	SROWS1(36)
	Q6W(0(SI), 4)
	PAIR(8(SP), 10(SP))
	SROWS1(68)
	Q6W(32(SI), 4)
	PAIR(12(SP), 14(SP))
	SROWS1(100)
	VMOVDQU   160(SI), Y7
	Q6W(64(SI), 0)
	PAIR(16(SP), 18(SP))
	SROWS1(132)
	Q6W(96(SI), 0)
	PAIR(20(SP), 22(SP))
	SROWS1(164)
	Q6W(64(SI), 4)
	PAIR(24(SP), 26(SP))
	SROWS1(196)
	Q6W(96(SI), 4)
	PAIR(28(SP), 30(SP))
	SROWS1(228)
	VPBROADCASTW 208(SI), X12
	VCVTPH2PS    X12, Y12
	VCVTDQ2PS    Y8, Y8
	VBROADCASTSS (DI), Y13
	VMULPS       Y12, Y13, Y13
	VFMADD231PS  Y8, Y13, Y0
	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q6kloop

q6kdone:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET


// func dot4Q6_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4Q6_KAVX2(SB), NOSPLIT, $32-96
	ARGS4
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x03030303, X15, Y15)
	TESTQ CX, CX
	JZ    q6k4done

q6k4loop:
	VPMOVSXBW 192(SI), Y7
	VMOVDQU   Y7, 0(SP)
	ZERO4
	VMOVDQU   128(SI), Y7
	Q6W(0(SI), 0)
	PAIR(0(SP), 2(SP))
	SROWS4(4)
	Q6W(32(SI), 0)
	PAIR(4(SP), 6(SP))
	SROWS4(36)
	Q6W(0(SI), 4)
	PAIR(8(SP), 10(SP))
	SROWS4(68)
	Q6W(32(SI), 4)
	PAIR(12(SP), 14(SP))
	SROWS4(100)
	VMOVDQU   160(SI), Y7
	Q6W(64(SI), 0)
	PAIR(16(SP), 18(SP))
	SROWS4(132)
	Q6W(96(SI), 0)
	PAIR(20(SP), 22(SP))
	SROWS4(164)
	Q6W(64(SI), 4)
	PAIR(24(SP), 26(SP))
	SROWS4(196)
	Q6W(96(SI), 4)
	PAIR(28(SP), 30(SP))
	SROWS4(228)
	VPBROADCASTW 208(SI), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y0)
	Q6DFMA((DI)(R8*1), Y9, Y1)
	Q6DFMA((DI)(R8*2), Y10, Y2)
	Q6DFMA((DI)(R9*1), Y11, Y3)
	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q6k4loop

q6k4done:
	STORE4
	VZEROUPPER
	RET

// ==== Q3_K =====================================================================

// func dotQ3_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ3_KAVX2(SB), NOSPLIT, $32-60
	ARGS1
	BCASTD($0x03030303, X15, Y15)
	TESTQ CX, CX
	JZ    q3kdone

q3kloop:
	Q3SCALES
	VPXOR   Y8, Y8, Y8
	VMOVDQU 0(SI), Y7
	Q3W(32(SI), 0)
	PAIR(0(SP), 2(SP))
	SROWS1(4)
	Q3W(32(SI), 2)
	PAIR(4(SP), 6(SP))
	SROWS1(36)
	Q3W(32(SI), 4)
	PAIR(8(SP), 10(SP))
	SROWS1(68)
	Q3W(32(SI), 6)
	PAIR(12(SP), 14(SP))
	SROWS1(100)
	Q3W(64(SI), 0)
	PAIR(16(SP), 18(SP))
	SROWS1(132)
	Q3W(64(SI), 2)
	PAIR(20(SP), 22(SP))
	SROWS1(164)
	Q3W(64(SI), 4)
	PAIR(24(SP), 26(SP))
	SROWS1(196)
	Q3W(64(SI), 6)
	PAIR(28(SP), 30(SP))
	SROWS1(228)
	VPBROADCASTW 108(SI), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y0)
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q3kloop

q3kdone:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4Q3_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4Q3_KAVX2(SB), NOSPLIT, $32-96
	ARGS4
	BCASTD($0x03030303, X15, Y15)
	TESTQ CX, CX
	JZ    q3k4done

q3k4loop:
	Q3SCALES
	ZERO4
	VMOVDQU 0(SI), Y7
	Q3W(32(SI), 0)
	PAIR(0(SP), 2(SP))
	SROWS4(4)
	Q3W(32(SI), 2)
	PAIR(4(SP), 6(SP))
	SROWS4(36)
	Q3W(32(SI), 4)
	PAIR(8(SP), 10(SP))
	SROWS4(68)
	Q3W(32(SI), 6)
	PAIR(12(SP), 14(SP))
	SROWS4(100)
	Q3W(64(SI), 0)
	PAIR(16(SP), 18(SP))
	SROWS4(132)
	Q3W(64(SI), 2)
	PAIR(20(SP), 22(SP))
	SROWS4(164)
	Q3W(64(SI), 4)
	PAIR(24(SP), 26(SP))
	SROWS4(196)
	Q3W(64(SI), 6)
	PAIR(28(SP), 30(SP))
	SROWS4(228)
	VPBROADCASTW 108(SI), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y0)
	Q6DFMA((DI)(R8*1), Y9, Y1)
	Q6DFMA((DI)(R8*2), Y10, Y2)
	Q6DFMA((DI)(R9*1), Y11, Y3)
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q3k4loop

q3k4done:
	STORE4
	VZEROUPPER
	RET

// ==== Q2_K =====================================================================

// func dotQ2_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ2_KAVX2(SB), NOSPLIT, $64-60
	ARGS1
	BCASTD($0x03030303, X15, Y15)
	TESTQ CX, CX
	JZ    q2kdone

q2kloop:
	Q2SCALES
	Q2MIN((DI), 260(DI), Y0)
	VPXOR Y8, Y8, Y8
	Q2Q(16(SI), 0)
	PAIR(0(SP), 2(SP))
	UROW(4(DI), Y4, Y12, Y8)
	Q2Q(16(SI), 2)
	PAIR(4(SP), 6(SP))
	UROW(36(DI), Y4, Y12, Y8)
	Q2Q(16(SI), 4)
	PAIR(8(SP), 10(SP))
	UROW(68(DI), Y4, Y12, Y8)
	Q2Q(16(SI), 6)
	PAIR(12(SP), 14(SP))
	UROW(100(DI), Y4, Y12, Y8)
	Q2Q(48(SI), 0)
	PAIR(16(SP), 18(SP))
	UROW(132(DI), Y4, Y12, Y8)
	Q2Q(48(SI), 2)
	PAIR(20(SP), 22(SP))
	UROW(164(DI), Y4, Y12, Y8)
	Q2Q(48(SI), 4)
	PAIR(24(SP), 26(SP))
	UROW(196(DI), Y4, Y12, Y8)
	Q2Q(48(SI), 6)
	PAIR(28(SP), 30(SP))
	UROW(228(DI), Y4, Y12, Y8)
	VPBROADCASTW 80(SI), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y0)
	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q2kloop

q2kdone:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

#define Q2ROWS4(o) \
	UROW(o(DI), Y4, Y12, Y8)             \
	UROW(o(DI)(R8*1), Y4, Y12, Y9)       \
	UROW(o(DI)(R8*2), Y4, Y12, Y10)      \
	UROW(o(DI)(R9*1), Y4, Y12, Y11)

// func dot4Q2_KAVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4Q2_KAVX2(SB), NOSPLIT, $64-96
	ARGS4
	BCASTD($0x03030303, X15, Y15)
	TESTQ CX, CX
	JZ    q2k4done

q2k4loop:
	Q2SCALES
	Q2MIN((DI), 260(DI), Y0)
	Q2MIN((DI)(R8*1), 260(DI)(R8*1), Y1)
	Q2MIN((DI)(R8*2), 260(DI)(R8*2), Y2)
	Q2MIN((DI)(R9*1), 260(DI)(R9*1), Y3)
	ZERO4
	Q2Q(16(SI), 0)
	PAIR(0(SP), 2(SP))
	Q2ROWS4(4)
	Q2Q(16(SI), 2)
	PAIR(4(SP), 6(SP))
	Q2ROWS4(36)
	Q2Q(16(SI), 4)
	PAIR(8(SP), 10(SP))
	Q2ROWS4(68)
	Q2Q(16(SI), 6)
	PAIR(12(SP), 14(SP))
	Q2ROWS4(100)
	Q2Q(48(SI), 0)
	PAIR(16(SP), 18(SP))
	Q2ROWS4(132)
	Q2Q(48(SI), 2)
	PAIR(20(SP), 22(SP))
	Q2ROWS4(164)
	Q2Q(48(SI), 4)
	PAIR(24(SP), 26(SP))
	Q2ROWS4(196)
	Q2Q(48(SI), 6)
	PAIR(28(SP), 30(SP))
	Q2ROWS4(228)
	VPBROADCASTW 80(SI), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y0)
	Q6DFMA((DI)(R8*1), Y9, Y1)
	Q6DFMA((DI)(R8*2), Y10, Y2)
	Q6DFMA((DI)(R9*1), Y11, Y3)
	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q2k4loop

q2k4done:
	STORE4
	VZEROUPPER
	RET

// ==== IQ4_XS ===================================================================

// func dotIQ4_XSAVX2(n int, w, a []byte) float32
TEXT ·dotIQ4_XSAVX2(SB), NOSPLIT, $32-60
	ARGS1
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y7
	TESTQ CX, CX
	JZ    iq4xsdone

iq4xsloop:
	XSSCALES
	VPXOR Y8, Y8, Y8
	XSW(8(SI), 0(SP))
	SROWS1(4)
	XSW(24(SI), 2(SP))
	SROWS1(36)
	XSW(40(SI), 4(SP))
	SROWS1(68)
	XSW(56(SI), 6(SP))
	SROWS1(100)
	XSW(72(SI), 8(SP))
	SROWS1(132)
	XSW(88(SI), 10(SP))
	SROWS1(164)
	XSW(104(SI), 12(SP))
	SROWS1(196)
	XSW(120(SI), 14(SP))
	SROWS1(228)
	VPBROADCASTW 0(SI), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y0)
	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq4xsloop

iq4xsdone:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4IQ4_XSAVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4IQ4_XSAVX2(SB), NOSPLIT, $32-96
	ARGS4
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y7
	TESTQ CX, CX
	JZ    iq4xs4done

iq4xs4loop:
	XSSCALES
	ZERO4
	XSW(8(SI), 0(SP))
	SROWS4(4)
	XSW(24(SI), 2(SP))
	SROWS4(36)
	XSW(40(SI), 4(SP))
	SROWS4(68)
	XSW(56(SI), 6(SP))
	SROWS4(100)
	XSW(72(SI), 8(SP))
	SROWS4(132)
	XSW(88(SI), 10(SP))
	SROWS4(164)
	XSW(104(SI), 12(SP))
	SROWS4(196)
	XSW(120(SI), 14(SP))
	SROWS4(228)
	VPBROADCASTW 0(SI), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y0)
	Q6DFMA((DI)(R8*1), Y9, Y1)
	Q6DFMA((DI)(R8*2), Y10, Y2)
	Q6DFMA((DI)(R9*1), Y11, Y3)
	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq4xs4loop

iq4xs4done:
	STORE4
	VZEROUPPER
	RET

DATA bytes01<>+0(SB)/8, $0x0101010101010101
DATA bytes01<>+8(SB)/8, $0x0101010101010101
DATA bytes01<>+16(SB)/8, $0x0101010101010101
DATA bytes01<>+24(SB)/8, $0x0101010101010101
GLOBL bytes01<>(SB), RODATA|NOPTR, $32
DATA bytes04<>+0(SB)/8, $0x0404040404040404
DATA bytes04<>+8(SB)/8, $0x0404040404040404
DATA bytes04<>+16(SB)/8, $0x0404040404040404
DATA bytes04<>+24(SB)/8, $0x0404040404040404
GLOBL bytes04<>(SB), RODATA|NOPTR, $32
DATA bytes20<>+0(SB)/8, $0x2020202020202020
DATA bytes20<>+8(SB)/8, $0x2020202020202020
DATA bytes20<>+16(SB)/8, $0x2020202020202020
DATA bytes20<>+24(SB)/8, $0x2020202020202020
GLOBL bytes20<>(SB), RODATA|NOPTR, $32
DATA words0F<>+0(SB)/8, $0x000f000f000f000f
DATA words0F<>+8(SB)/8, $0x000f000f000f000f
DATA words0F<>+16(SB)/8, $0x000f000f000f000f
DATA words0F<>+24(SB)/8, $0x000f000f000f000f
GLOBL words0F<>(SB), RODATA|NOPTR, $32
