//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// Four-weight-row matvec kernel (decode) of Q2_K against Q8_K: dotR4Q2_KAVX2(n, w, wstride, a, out) writes to out[j] the dot
// product of the weight row at w + j·wstride with the activation row a, for
// j = 0..3. Each super-block runs the single-row kernel's body
// (dot_k_amd64.s, its macros read here with the row in DX) once per row,
// into the row's own accumulator: every row gets exactly the single-row
// kernel's operations, the four rows' chains overlap, and a pointer r4Lead
// rows ahead prefetches the rows linearly.
//
// Registers: SI weight row 0, R8 wstride, R9 3·wstride, DX the current
// row, DI activations, CX super-blocks, R13 prefetch, Y0..Y3 row
// accumulators; the rest as in dot_k_amd64.s. Every macro precedes the
// first TEXT.

#define BCASTD(v, x, y) MOVL v, BX; VMOVD BX, x; VPBROADCASTD x, y





// UROW: sum += madd(scale, maddubs(q (unsigned, in reg), a)).
#define UROW(a, q, scale, sum) \
	VPMADDUBSW a, q, Y13       \
	VPMADDWD   scale, Y13, Y13 \
	VPADDD     Y13, sum, sum


#define Q3SCALES \
	MOVL 96(DX), R10             \
	MOVL 100(DX), R11            \
	MOVL 104(DX), R12            \
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

#define Q2SCALES \
	VPMOVZXBW 0(DX), Y12         \
	VPSRLW    $4, Y12, Y13       \
	VPAND     words0F<>(SB), Y12, Y12 \
	VMOVDQU   Y12, 0(SP)         \
	VMOVDQU   Y13, 32(SP)        \
	VPBROADCASTW 82(DX), X6      \
	VCVTPH2PS X6, Y6




#define XSSCALES \
	MOVL    4(DX), R10             \
	MOVWLZX 2(DX), R11             \
	XSLS(0, 0, 0)                  \
	XSLS(4, 2, 2)                  \
	XSLS(8, 4, 4)                  \
	XSLS(12, 6, 6)                 \
	XSLS(16, 8, 8)                 \
	XSLS(20, 10, 10)               \
	XSLS(24, 12, 12)               \
	XSLS(28, 14, 14)



#define K2ARGS \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ wstride+32(FP), R8    \
	LEAQ (R8)(R8*2), R9        \
	MOVQ a_base+40(FP), DI     \
	MOVQ ·r4Lead(SB), R13      \
	IMULQ R8, R13              \
	ADDQ SI, R13               \
	SHRQ $8, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3

#define K2STORE \
	MOVQ   out_base+64(FP), AX \
	HSUMX(Y0, X0, X12)         \
	VMOVSS X0, (AX)            \
	HSUMX(Y1, X1, X12)         \
	VMOVSS X1, 4(AX)           \
	HSUMX(Y2, X2, X12)         \
	VMOVSS X2, 8(AX)           \
	HSUMX(Y3, X3, X12)         \
	VMOVSS X3, 12(AX)


// func dotR4Q2_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q2_KAVX2(SB), NOSPLIT, $64-88
	K2ARGS
	BCASTD($0x03030303, X15, Y15)
	TESTQ CX, CX
	JZ    r4q2kdone

r4q2kloop:
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	ADDQ $(336), R13
	MOVQ SI, DX
	Q2SCALES
	Q2MIN((DI), 260(DI), Y0)
	VPXOR Y8, Y8, Y8
	Q2Q(16(DX), 0)
	PAIR(0(SP), 2(SP))
	UROW(4(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 2)
	PAIR(4(SP), 6(SP))
	UROW(36(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 4)
	PAIR(8(SP), 10(SP))
	UROW(68(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 6)
	PAIR(12(SP), 14(SP))
	UROW(100(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 0)
	PAIR(16(SP), 18(SP))
	UROW(132(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 2)
	PAIR(20(SP), 22(SP))
	UROW(164(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 4)
	PAIR(24(SP), 26(SP))
	UROW(196(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 6)
	PAIR(28(SP), 30(SP))
	UROW(228(DI), Y4, Y12, Y8)
	VPBROADCASTW 80(DX), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y0)
	LEAQ (SI)(R8*1), DX
	Q2SCALES
	Q2MIN((DI), 260(DI), Y1)
	VPXOR Y8, Y8, Y8
	Q2Q(16(DX), 0)
	PAIR(0(SP), 2(SP))
	UROW(4(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 2)
	PAIR(4(SP), 6(SP))
	UROW(36(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 4)
	PAIR(8(SP), 10(SP))
	UROW(68(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 6)
	PAIR(12(SP), 14(SP))
	UROW(100(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 0)
	PAIR(16(SP), 18(SP))
	UROW(132(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 2)
	PAIR(20(SP), 22(SP))
	UROW(164(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 4)
	PAIR(24(SP), 26(SP))
	UROW(196(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 6)
	PAIR(28(SP), 30(SP))
	UROW(228(DI), Y4, Y12, Y8)
	VPBROADCASTW 80(DX), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y1)
	LEAQ (SI)(R8*2), DX
	Q2SCALES
	Q2MIN((DI), 260(DI), Y2)
	VPXOR Y8, Y8, Y8
	Q2Q(16(DX), 0)
	PAIR(0(SP), 2(SP))
	UROW(4(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 2)
	PAIR(4(SP), 6(SP))
	UROW(36(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 4)
	PAIR(8(SP), 10(SP))
	UROW(68(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 6)
	PAIR(12(SP), 14(SP))
	UROW(100(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 0)
	PAIR(16(SP), 18(SP))
	UROW(132(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 2)
	PAIR(20(SP), 22(SP))
	UROW(164(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 4)
	PAIR(24(SP), 26(SP))
	UROW(196(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 6)
	PAIR(28(SP), 30(SP))
	UROW(228(DI), Y4, Y12, Y8)
	VPBROADCASTW 80(DX), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y2)
	LEAQ (SI)(R9*1), DX
	Q2SCALES
	Q2MIN((DI), 260(DI), Y3)
	VPXOR Y8, Y8, Y8
	Q2Q(16(DX), 0)
	PAIR(0(SP), 2(SP))
	UROW(4(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 2)
	PAIR(4(SP), 6(SP))
	UROW(36(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 4)
	PAIR(8(SP), 10(SP))
	UROW(68(DI), Y4, Y12, Y8)
	Q2Q(16(DX), 6)
	PAIR(12(SP), 14(SP))
	UROW(100(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 0)
	PAIR(16(SP), 18(SP))
	UROW(132(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 2)
	PAIR(20(SP), 22(SP))
	UROW(164(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 4)
	PAIR(24(SP), 26(SP))
	UROW(196(DI), Y4, Y12, Y8)
	Q2Q(48(DX), 6)
	PAIR(28(SP), 30(SP))
	UROW(228(DI), Y4, Y12, Y8)
	VPBROADCASTW 80(DX), X12
	VCVTPH2PS    X12, Y12
	Q6DFMA((DI), Y8, Y3)
	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  r4q2kloop

r4q2kdone:
	K2STORE
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
