//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// The 32-value block types against Q8_0 (Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4)
// and Q8_1 (Q4_1, Q5_1): single-row kernels dot<T>AVX2 and four-row kernels
// dot4<T>AVX2 that give every row the same float32 operations in the same
// order, which is ggml-cpu's AVX2 vec_dot order:
//
//   - the block's weights become 32 int8 (or uint8) values; VPSIGNB moves the
//     weight's sign onto the activation, VPMADDUBSW and VPMADDWD (ones) give
//     eight int32 lanes, lane k holding values 4k..4k+3 (exact);
//   - acc = fma(d_w·d_a, float(lanes), acc) over the blocks in order, in one
//     accumulator (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) or two, even and odd blocks
//     (IQ4_NL, MXFP4, whose odd last block is added in scalar:
//     s = fma(d, float(Σ), s));
//   - the result is hsum_float_8 (high + low half, then movehl, then
//     movehdup), plus Σ m_w·s_a (scalar fma, block order) for Q4_1/Q5_1.
//
// Activations are in [-127, 127] (the quantizers guarantee it), so no int16
// pair saturates. Registers: SI weights, DI activations (row 0), R8 stride,
// R9 3·stride, CX blocks, Y0..Y3 row accumulators (Y8..Y11 the odd-block
// ones), Y4 d_w, Y5 |w|, Y6 w, Y7/Y12 temporaries, Y13 a per-type constant,
// Y14 bytes 0x0F, Y15 int16 ones. Every macro precedes the first TEXT.

#define BCASTD(v, x, y) MOVL v, BX; VMOVD BX, x; VPBROADCASTD x, y


#define ARGS1 \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ a_base+32(FP), DI     \
	SHRQ $5, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y8, Y8, Y8

#define ARGS4 \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ a_base+32(FP), DI     \
	MOVQ stride+56(FP), R8     \
	LEAQ (R8)(R8*2), R9        \
	SHRQ $5, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3          \
	VXORPS Y8, Y8, Y8          \
	VXORPS Y9, Y9, Y9          \
	VXORPS Y10, Y10, Y10       \
	VXORPS Y11, Y11, Y11


// ROW adds one activation row's block (fp16 scale at d, quants at q):
// acc = fma(d_w·d_a, float(lanes of Σ w·a), acc).
#define ROW(d, q, acc) \
	VPBROADCASTW d, X7         \
	VCVTPH2PS    X7, Y7        \
	VMULPS       Y4, Y7, Y7    \
	VMOVDQU      q, Y12        \
	VPSIGNB      Y6, Y12, Y12  \
	VPMADDUBSW   Y12, Y5, Y12  \
	VPMADDWD     Y15, Y12, Y12 \
	VCVTDQ2PS    Y12, Y12      \
	VFMADD231PS  Y12, Y7, acc

#define ABS VPSIGNB Y6, Y6, Y5

#define ROWS4(o, a0, a1, a2, a3) \
	ABS                                        \
	ROW(o(DI), o+2(DI), a0)                    \
	ROW(o(DI)(R8*1), o+2(DI)(R8*1), a1)        \
	ROW(o(DI)(R8*2), o+2(DI)(R8*2), a2)        \
	ROW(o(DI)(R9*1), o+2(DI)(R9*1), a3)

// TAILROW adds the last block of one row in scalar, as ggml's leftover loop
// does: out = fma(d_w·d_a, float(Σ w·a), out) (out a float32 in memory).
#define TAILROW(d, q, out) \
	VPBROADCASTW d, X7         \
	VCVTPH2PS    X7, X7        \
	VMULSS       X4, X7, X7    \
	VMOVDQU      q, Y12        \
	VPSIGNB      Y6, Y12, Y12  \
	VPMADDUBSW   Y12, Y5, Y12  \
	VPMADDWD     Y15, Y12, Y12 \
	VEXTRACTI128 $1, Y12, X13  \
	VPADDD       X13, X12, X12 \
	VPSHUFD      $0x4e, X12, X13 \
	VPADDD       X13, X12, X12 \
	VPSHUFD      $0xb1, X12, X13 \
	VPADDD       X13, X12, X12 \
	VCVTDQ2PS    X12, X12      \
	VMOVSS       out, X13      \
	VFMADD231SS  X12, X7, X13  \
	VMOVSS       X13, out

// TAILROWX is TAILROW accumulating into X0 (the single-row kernels).
#define TAILROWX(d, q) \
	VPBROADCASTW d, X7         \
	VCVTPH2PS    X7, X7        \
	VMULSS       X4, X7, X7    \
	VMOVDQU      q, Y12        \
	VPSIGNB      Y6, Y12, Y12  \
	VPMADDUBSW   Y12, Y5, Y12  \
	VPMADDWD     Y15, Y12, Y12 \
	VEXTRACTI128 $1, Y12, X13  \
	VPADDD       X13, X12, X12 \
	VPSHUFD      $0x4e, X12, X13 \
	VPADDD       X13, X12, X12 \
	VPSHUFD      $0xb1, X12, X13 \
	VPADDD       X13, X12, X12 \
	VCVTDQ2PS    X12, X12      \
	VFMADD231SS  X12, X7, X0

// ---- weight preparation: Y4 = block scale (float32 ×8), Y6 = int8 values --

#define WD16(addr) VPBROADCASTW addr, X4; VCVTPH2PS X4, Y4

// NIB32 leaves the 32 nibbles of the 16 bytes at addr in Y6: low nibbles
// (values 0..15) in the low half, high nibbles (16..31) in the high half.
#define NIB32(addr) \
	VMOVDQU     addr, X6       \
	VPSRLW      $4, X6, X7     \
	VINSERTI128 $1, X7, Y6, Y6 \
	VPAND       Y14, Y6, Y6

#define PREPQ8_0(o) WD16(o(SI)); VMOVDQU o+2(SI), Y6
#define PREPQ4_0(o) WD16(o(SI)); NIB32(o+2(SI)); VPSUBB Y13, Y6, Y6
#define PREPIQ4NL(o) WD16(o(SI)); NIB32(o+2(SI)); VPSHUFB Y6, Y13, Y6

// MXFP4: Y4 = 2^(e−128) from e8m0HalfTab (R10).
#define PREPMXFP4(o) \
	MOVBLZX      o(SI), BX     \
	VBROADCASTSS (R10)(BX*4), Y4 \
	NIB32(o+1(SI))             \
	VPSHUFB      Y6, Y13, Y6

// HIBITS spreads the 32 bits of the dword at addr over the bytes of Y7:
// 0xFF where the bit is set.
#define HIBITS(addr) \
	VPBROADCASTD addr, Y7              \
	VPSHUFB      hibitShuf<>(SB), Y7, Y7 \
	VPOR         hibitMask<>(SB), Y7, Y7 \
	VPCMPEQB     allOnes<>(SB), Y7, Y7

// Q5_0: value = nibble | (bit ? 0 : 0xF0) as int8, i.e. (nibble | bit<<4) − 16.
#define PREPQ5_0(o) \
	WD16(o(SI))                        \
	NIB32(o+6(SI))                     \
	HIBITS(o+2(SI))                    \
	VPANDN       bytesF0<>(SB), Y7, Y7 \
	VPOR         Y7, Y6, Y6

// ---- Q4_1 / Q5_1 (unsigned quants; per block m_w·s_a in X9) ----------------

#define UROW(wo, ao) \
	VPBROADCASTW wo(SI), X4    \
	VCVTPH2PS    X4, Y4        \
	VPBROADCASTW ao(DI), X7    \
	VCVTPH2PS    X7, Y7        \
	VMULPS       Y7, Y4, Y7    \
	VPBROADCASTW wo+2(SI), X4  \
	VCVTPH2PS    X4, X4        \
	VPBROADCASTW ao+2(DI), X12 \
	VCVTPH2PS    X12, X12      \
	VFMADD231SS  X12, X4, X9   \
	VMOVDQU      ao+4(DI), Y12 \
	VPMADDUBSW   Y12, Y6, Y12  \
	VPMADDWD     Y15, Y12, Y12 \
	VCVTDQ2PS    Y12, Y12      \
	VFMADD231PS  Y12, Y7, Y0

#define PREPQ4_1(o) NIB32(o+4(SI))

#define PREPQ5_1(o) \
	NIB32(o+8(SI))                     \
	HIBITS(o+4(SI))                    \
	VPAND        bytes10<>(SB), Y7, Y7 \
	VPOR         Y7, Y6, Y6

// ---- loops ------------------------------------------------------------------

// func dotQ8_0AVX2(n int, w, a []byte) float32
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-60
	ARGS1
	ONES16
	TESTQ CX, CX
	JZ    q80done

q80loop:
	PREPQ8_0(0)
	ABS
	ROW(0(DI), 2(DI), Y0)
	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q80loop

q80done:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4Q8_0AVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4Q8_0AVX2(SB), NOSPLIT, $0-96
	ARGS4
	ONES16
	TESTQ CX, CX
	JZ    q804done

q804loop:
	PREPQ8_0(0)
	ROWS4(0, Y0, Y1, Y2, Y3)
	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q804loop

q804done:
	STORE4
	VZEROUPPER
	RET

// func dotQ4_0AVX2(n int, w, a []byte) float32
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-60
	ARGS1
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x08080808, X13, Y13)
	TESTQ CX, CX
	JZ    q40done

q40loop:
	PREPQ4_0(0)
	ABS
	ROW(0(DI), 2(DI), Y0)
	ADDQ $18, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q40loop

q40done:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4Q4_0AVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4Q4_0AVX2(SB), NOSPLIT, $0-96
	ARGS4
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x08080808, X13, Y13)
	TESTQ CX, CX
	JZ    q404done

q404loop:
	PREPQ4_0(0)
	ROWS4(0, Y0, Y1, Y2, Y3)
	ADDQ $18, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q404loop

q404done:
	STORE4
	VZEROUPPER
	RET

// func dotQ5_0AVX2(n int, w, a []byte) float32
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-60
	ARGS1
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    q50done

q50loop:
	PREPQ5_0(0)
	ABS
	ROW(0(DI), 2(DI), Y0)
	ADDQ $22, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q50loop

q50done:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4Q5_0AVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4Q5_0AVX2(SB), NOSPLIT, $0-96
	ARGS4
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    q504done

q504loop:
	PREPQ5_0(0)
	ROWS4(0, Y0, Y1, Y2, Y3)
	ADDQ $22, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q504loop

q504done:
	STORE4
	VZEROUPPER
	RET

// func dotIQ4_NLAVX2(n int, w, a []byte) float32
TEXT ·dotIQ4_NLAVX2(SB), NOSPLIT, $0-60
	ARGS1
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y13

iq4nlloop:
	CMPQ CX, $2
	JB   iq4nltail
	PREPIQ4NL(0)
	ABS
	ROW(0(DI), 2(DI), Y0)
	PREPIQ4NL(18)
	ABS
	ROW(34(DI), 36(DI), Y8)
	ADDQ $36, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  iq4nlloop

iq4nltail:
	VADDPS Y8, Y0, Y0
	HSUMX(Y0, X0, X1)
	TESTQ  CX, CX
	JZ     iq4nldone
	VMOVAPS X0, X9
	PREPIQ4NL(0)
	ABS
	VMOVAPS X9, X0
	TAILROWX(0(DI), 2(DI))

iq4nldone:
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4IQ4_NLAVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4IQ4_NLAVX2(SB), NOSPLIT, $0-96
	ARGS4
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y13

iq4nl4loop:
	CMPQ CX, $2
	JB   iq4nl4tail
	PREPIQ4NL(0)
	ROWS4(0, Y0, Y1, Y2, Y3)
	PREPIQ4NL(18)
	ROWS4(34, Y8, Y9, Y10, Y11)
	ADDQ $36, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  iq4nl4loop

iq4nl4tail:
	VADDPS Y8, Y0, Y0
	VADDPS Y9, Y1, Y1
	VADDPS Y10, Y2, Y2
	VADDPS Y11, Y3, Y3
	STORE4
	TESTQ CX, CX
	JZ    iq4nl4done
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y13
	PREPIQ4NL(0)
	ABS
	TAILROW((DI), 2(DI), (AX))
	TAILROW((DI)(R8*1), 2(DI)(R8*1), (AX)(R12*1))
	TAILROW((DI)(R8*2), 2(DI)(R8*2), (AX)(R12*2))
	TAILROW((DI)(R9*1), 2(DI)(R9*1), (AX)(R13*1))

iq4nl4done:
	VZEROUPPER
	RET

// func dotMXFP4AVX2(n int, w, a []byte) float32
TEXT ·dotMXFP4AVX2(SB), NOSPLIT, $0-60
	ARGS1
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesMXFP4(SB), Y13
	LEAQ ·e8m0HalfTab(SB), R10

mxloop:
	CMPQ CX, $2
	JB   mxtail
	PREPMXFP4(0)
	ABS
	ROW(0(DI), 2(DI), Y0)
	PREPMXFP4(17)
	ABS
	ROW(34(DI), 36(DI), Y8)
	ADDQ $34, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  mxloop

mxtail:
	VADDPS Y8, Y0, Y0
	HSUMX(Y0, X0, X1)
	TESTQ  CX, CX
	JZ     mxdone
	VMOVAPS X0, X9
	PREPMXFP4(0)
	ABS
	VMOVAPS X9, X0
	TAILROWX(0(DI), 2(DI))

mxdone:
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4MXFP4AVX2(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4MXFP4AVX2(SB), NOSPLIT, $0-96
	ARGS4
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesMXFP4(SB), Y13
	LEAQ ·e8m0HalfTab(SB), R10

mx4loop:
	CMPQ CX, $2
	JB   mx4tail
	PREPMXFP4(0)
	ROWS4(0, Y0, Y1, Y2, Y3)
	PREPMXFP4(17)
	ROWS4(34, Y8, Y9, Y10, Y11)
	ADDQ $34, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  mx4loop

mx4tail:
	VADDPS Y8, Y0, Y0
	VADDPS Y9, Y1, Y1
	VADDPS Y10, Y2, Y2
	VADDPS Y11, Y3, Y3
	STORE4
	TESTQ CX, CX
	JZ    mx4done
	VBROADCASTI128 ·kvaluesMXFP4(SB), Y13
	PREPMXFP4(0)
	ABS
	TAILROW((DI), 2(DI), (AX))
	TAILROW((DI)(R8*1), 2(DI)(R8*1), (AX)(R12*1))
	TAILROW((DI)(R8*2), 2(DI)(R8*2), (AX)(R12*2))
	TAILROW((DI)(R9*1), 2(DI)(R9*1), (AX)(R13*1))

mx4done:
	VZEROUPPER
	RET

// func dotQ4_1AVX2(n int, w, a []byte) float32
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-60
	ARGS1
	VXORPS X9, X9, X9
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    q41done

q41loop:
	PREPQ4_1(0)
	UROW(0, 0)
	ADDQ $20, SI
	ADDQ $36, DI
	DECQ CX
	JNZ  q41loop

q41done:
	HSUMX(Y0, X0, X1)
	VADDSS X9, X0, X0
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dotQ5_1AVX2(n int, w, a []byte) float32
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-60
	ARGS1
	VXORPS X9, X9, X9
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    q51done

q51loop:
	PREPQ5_1(0)
	UROW(0, 0)
	ADDQ $24, SI
	ADDQ $36, DI
	DECQ CX
	JNZ  q51loop

q51done:
	HSUMX(Y0, X0, X1)
	VADDSS X9, X0, X0
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// hibitShuf picks byte k/8 of the broadcast dword for byte k of each lane
// (the high lane picks bytes 2 and 3); hibitMask has every bit of byte j
// set except bit j (j = byte index mod 8).
DATA hibitShuf<>+0(SB)/8, $0x0000000000000000
DATA hibitShuf<>+8(SB)/8, $0x0101010101010101
DATA hibitShuf<>+16(SB)/8, $0x0202020202020202
DATA hibitShuf<>+24(SB)/8, $0x0303030303030303
GLOBL hibitShuf<>(SB), RODATA|NOPTR, $32
DATA hibitMask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA hibitMask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA hibitMask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA hibitMask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL hibitMask<>(SB), RODATA|NOPTR, $32
DATA allOnes<>+0(SB)/8, $-1
DATA allOnes<>+8(SB)/8, $-1
DATA allOnes<>+16(SB)/8, $-1
DATA allOnes<>+24(SB)/8, $-1
GLOBL allOnes<>(SB), RODATA|NOPTR, $32
DATA bytesF0<>+0(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA bytesF0<>+8(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA bytesF0<>+16(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA bytesF0<>+24(SB)/8, $0xf0f0f0f0f0f0f0f0
GLOBL bytesF0<>(SB), RODATA|NOPTR, $32
DATA bytes10<>+0(SB)/8, $0x1010101010101010
DATA bytes10<>+8(SB)/8, $0x1010101010101010
DATA bytes10<>+16(SB)/8, $0x1010101010101010
DATA bytes10<>+24(SB)/8, $0x1010101010101010
GLOBL bytes10<>(SB), RODATA|NOPTR, $32
