//go:build amd64 && !noasm

#include "textflag.h"

// Four-row kernels: one weight row against four activation rows at a,
// a+stride, a+2·stride, a+3·stride. Each weight block is unpacked once and
// used four times, which is where prefill gains over decode.
//
// func dot4<T>AVX2(n int, w, a []byte, stride int, out *[4]float32)
//
// Registers: SI weights, DI activation row 0, R8 stride, R9 3·stride,
// AX out, CX blocks left, Y0..Y3 the rows' float accumulators.

#define ARGS4(shift) \
	MOVQ n+0(FP), CX              \
	MOVQ w_base+8(FP), SI         \
	MOVQ a_base+32(FP), DI        \
	MOVQ stride+56(FP), R8        \
	LEAQ (R8)(R8*2), R9           \
	SHRQ $shift, CX               \
	VXORPS Y0, Y0, Y0             \
	VXORPS Y1, Y1, Y1             \
	VXORPS Y2, Y2, Y2             \
	VXORPS Y3, Y3, Y3

// STORE4 reduces Y0..Y3 and writes the four sums to out.
#define STORE4 \
	MOVQ         out+64(FP), AX   \
	VHADDPS      Y1, Y0, Y0       \
	VHADDPS      Y3, Y2, Y2       \
	VHADDPS      Y2, Y0, Y0       \
	VEXTRACTF128 $1, Y0, X1       \
	VADDPS       X1, X0, X0       \
	VMOVUPS      X0, (AX)         \
	VZEROUPPER                    \
	RET

#define ONES16 VPCMPEQW Y15, Y15, Y15; VPSRLW $15, Y15, Y15
#define BCASTD(v, x, y) MOVL v, BX; VMOVD BX, x; VPBROADCASTD x, y

// ---- 32-value blocks against Q8_0 rows (34-byte blocks) -------------------
// The weight block is prepared in Y4 (d_w, float32 ×8), Y6 (int8 values) and
// Y5 (|values|); S8ROW then adds one activation row.

#define S8ROW(d, q, acc) \
	VPBROADCASTW d, X7         \
	VCVTPH2PS    X7, Y7        \
	VMULPS       Y4, Y7, Y7    \
	VMOVDQU      q, Y8         \
	VPSIGNB      Y6, Y8, Y8    \
	VPMADDUBSW   Y8, Y5, Y8    \
	VPMADDWD     Y15, Y8, Y8   \
	VCVTDQ2PS    Y8, Y8        \
	VFMADD231PS  Y8, Y7, acc

#define S8ROWS \
	VPSIGNB Y6, Y6, Y5                   \
	S8ROW((DI), 2(DI), Y0)               \
	S8ROW((DI)(R8*1), 2(DI)(R8*1), Y1)   \
	S8ROW((DI)(R8*2), 2(DI)(R8*2), Y2)   \
	S8ROW((DI)(R9*1), 2(DI)(R9*1), Y3)   \
	ADDQ $34, DI

// NIB32 leaves the 32 nibbles of the 16 bytes at addr in Y6 (ggml order).
#define NIB32(addr) \
	VMOVDQU     addr, X6           \
	VPSRLW      $4, X6, X7         \
	VINSERTI128 $1, X7, Y6, Y6     \
	VPAND       Y14, Y6, Y6

#define WD16(addr) VPBROADCASTW addr, X4; VCVTPH2PS X4, Y4

// func dot4Q4_0AVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4Q4_0AVX2(SB), NOSPLIT, $0-72
	ARGS4(5)
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x08080808, X13, Y13)

q404loop:
	WD16(0(SI))
	NIB32(2(SI))
	VPSUBB Y13, Y6, Y6
	S8ROWS
	ADDQ $18, SI
	DECQ CX
	JNZ  q404loop
	STORE4

// func dot4IQ4_NLAVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4IQ4_NLAVX2(SB), NOSPLIT, $0-72
	ARGS4(5)
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y13

iq4nl4loop:
	WD16(0(SI))
	NIB32(2(SI))
	VPSHUFB Y6, Y13, Y6
	S8ROWS
	ADDQ $18, SI
	DECQ CX
	JNZ  iq4nl4loop
	STORE4

// func dot4MXFP4AVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4MXFP4AVX2(SB), NOSPLIT, $0-72
	ARGS4(5)
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesMXFP4(SB), Y13
	LEAQ ·e8m0HalfTab(SB), R10

mx4loop:
	MOVBLZX      (SI), BX
	VBROADCASTSS (R10)(BX*4), Y4
	NIB32(1(SI))
	VPSHUFB Y6, Y13, Y6
	S8ROWS
	ADDQ $17, SI
	DECQ CX
	JNZ  mx4loop
	STORE4

// func dot4Q5_0AVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4Q5_0AVX2(SB), NOSPLIT, $0-72
	ARGS4(5)
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0xf0f0f0f0, X12, Y12)
	VMOVDQU   hibitShuf4<>(SB), Y11
	MOVQ      $0x7fbfdfeff7fbfdfe, BX
	VMOVQ     BX, X10
	VPBROADCASTQ X10, Y10
	VPCMPEQB  Y9, Y9, Y9

q504loop:
	WD16(0(SI))
	NIB32(6(SI))
	VPBROADCASTD 2(SI), Y7
	VPSHUFB      Y11, Y7, Y7
	VPOR         Y10, Y7, Y7
	VPCMPEQB     Y9, Y7, Y7
	VPANDN       Y12, Y7, Y7
	VPOR         Y7, Y6, Y6
	S8ROWS
	ADDQ $22, SI
	DECQ CX
	JNZ  q504loop
	STORE4

DATA hibitShuf4<>+0(SB)/8, $0x0000000000000000
DATA hibitShuf4<>+8(SB)/8, $0x0101010101010101
DATA hibitShuf4<>+16(SB)/8, $0x0202020202020202
DATA hibitShuf4<>+24(SB)/8, $0x0303030303030303
GLOBL hibitShuf4<>(SB), RODATA|NOPTR, $32

