//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// Eight-activation-row matmul kernels (prefill) of the 32-value block types
// against Q8_0: dotT8<T>AVX2(n, w, a, stride, sc, out, ostride) writes to
// out[r·ostride] the dot product of the weight row w with the activation row
// a + r·stride, r = 0..7. The activation scales come as float32, transposed
// (sc[8b + r], see actScales), so one VMULPS forms the eight d_w·d_a of a
// block; the weight block is prepared once for the eight rows. Every row
// gets exactly the float32 operations of the single-row kernel
// dot<T>AVX2 (dot_q32_amd64.s) in the same order: lanes from
// VPSIGNB/VPMADDUBSW/VPMADDWD, acc = fma(d_w·d_a, float(lanes), acc) block
// by block, hsum_float_8.
//
// Registers: SI weights, DI activations of row 0, R8 stride, R9 3·stride,
// R10 5·stride, R11 7·stride, BX scales, CX blocks, accumulators Y0 Y1 Y2
// Y3 Y7 Y8 Y9 Y10 (rows 0..7), Y4 the eight scale products (stored at
// 0(SP)), Y6 w, Y5 |w|, Y12/Y13 temporaries, Y11 a per-type constant, Y14
// bytes 0x0F, Y15 int16 ones.

#define BCASTD(v, x, y) MOVL v, AX; VMOVD AX, x; VPBROADCASTD x, y





// T8ROW: acc += (d_w·d_a of row r) · float(lanes of Σ w·a), row r's quants at q.
#define T8ROW(q, r, acc) \
	VMOVDQU      q, Y12        \
	VPSIGNB      Y6, Y12, Y12  \
	VPMADDUBSW   Y12, Y5, Y12  \
	VPMADDWD     Y15, Y12, Y12 \
	VCVTDQ2PS    Y12, Y12      \
	VBROADCASTSS r*4(SP), Y13  \
	VFMADD231PS  Y12, Y13, acc

#define T8ROWS \
	VPSIGNB Y6, Y6, Y5                   \
	T8ROW(2(DI), 0, Y0)                  \
	T8ROW(2(DI)(R8*1), 1, Y1)            \
	T8ROW(2(DI)(R8*2), 2, Y2)            \
	T8ROW(2(DI)(R9*1), 3, Y3)            \
	T8ROW(2(DI)(R8*4), 4, Y7)            \
	T8ROW(2(DI)(R10*1), 5, Y8)           \
	T8ROW(2(DI)(R9*2), 6, Y9)            \
	T8ROW(2(DI)(R11*1), 7, Y10)

// NIB32: the 32 nibbles of the 16 bytes at q in Y6 (low nibbles first).
#define NIB32(q) \
	VMOVDQU     q, X6          \
	VPSRLW      $4, X6, X5     \
	VINSERTI128 $1, X5, Y6, Y6 \
	VPAND       Y14, Y6, Y6

// HIBITS5: Q5_0's value nibble | (bit ? 0 : 0xF0) as int8, bits at h.
#define HIBITS5(h) \
	VPBROADCASTD h, Y5                      \
	VPSHUFB      t8hibitShuf<>(SB), Y5, Y5  \
	VPOR         t8hibitMask<>(SB), Y5, Y5  \
	VPCMPEQB     t8allOnes<>(SB), Y5, Y5    \
	VPANDN       t8bytesF0<>(SB), Y5, Y5    \
	VPOR         Y5, Y6, Y6

// func dotT8Q8_0AVX2(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)
TEXT ·dotT8Q8_0AVX2(SB), NOSPLIT, $32-120
	ARGST8
	ONES16
	TESTQ CX, CX
	JZ    t8q80done

t8q80loop:
	SCALES(0(SI))
	VMOVDQU 2(SI), Y6
	T8ROWS
	ADDQ $34, SI
	ADDQ $34, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  t8q80loop

t8q80done:
	STORET8
	VZEROUPPER
	RET

// func dotT8Q4_0AVX2(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)
TEXT ·dotT8Q4_0AVX2(SB), NOSPLIT, $32-120
	ARGST8
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x08080808, X11, Y11)
	TESTQ CX, CX
	JZ    t8q40done

t8q40loop:
	SCALES(0(SI))
	NIB32(2(SI))
	VPSUBB Y11, Y6, Y6
	T8ROWS
	ADDQ $18, SI
	ADDQ $34, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  t8q40loop

t8q40done:
	STORET8
	VZEROUPPER
	RET

// func dotT8Q5_0AVX2(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)
TEXT ·dotT8Q5_0AVX2(SB), NOSPLIT, $32-120
	ARGST8
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    t8q50done

t8q50loop:
	SCALES(0(SI))
	NIB32(6(SI))
	HIBITS5(2(SI))
	T8ROWS
	ADDQ $22, SI
	ADDQ $34, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  t8q50loop

t8q50done:
	STORET8
	VZEROUPPER
	RET

DATA t8hibitShuf<>+0(SB)/8, $0x0000000000000000
DATA t8hibitShuf<>+8(SB)/8, $0x0101010101010101
DATA t8hibitShuf<>+16(SB)/8, $0x0202020202020202
DATA t8hibitShuf<>+24(SB)/8, $0x0303030303030303
GLOBL t8hibitShuf<>(SB), RODATA|NOPTR, $32
DATA t8hibitMask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA t8hibitMask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA t8hibitMask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA t8hibitMask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL t8hibitMask<>(SB), RODATA|NOPTR, $32
DATA t8allOnes<>+0(SB)/8, $-1
DATA t8allOnes<>+8(SB)/8, $-1
DATA t8allOnes<>+16(SB)/8, $-1
DATA t8allOnes<>+24(SB)/8, $-1
GLOBL t8allOnes<>(SB), RODATA|NOPTR, $32
DATA t8bytesF0<>+0(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA t8bytesF0<>+8(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA t8bytesF0<>+16(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA t8bytesF0<>+24(SB)/8, $0xf0f0f0f0f0f0f0f0
GLOBL t8bytesF0<>(SB), RODATA|NOPTR, $32
