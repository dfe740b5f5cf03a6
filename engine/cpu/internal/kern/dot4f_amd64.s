//go:build amd64 && !noasm

#include "textflag.h"

// Four-row float kernels (F32, F16, BF16), 16 values per iteration with two
// accumulators per row (Y0..Y7). n is a multiple of 16 here; the Go
// wrappers add the tail. Calling convention as in dot4_amd64.s.

#define FARGS4 \
	MOVQ n+0(FP), CX              \
	MOVQ w_base+8(FP), SI         \
	MOVQ a_base+32(FP), DI        \
	MOVQ stride+56(FP), R8        \
	LEAQ (R8)(R8*2), R9           \
	SHRQ $4, CX                   \
	VXORPS Y0, Y0, Y0             \
	VXORPS Y1, Y1, Y1             \
	VXORPS Y2, Y2, Y2             \
	VXORPS Y3, Y3, Y3             \
	VXORPS Y4, Y4, Y4             \
	VXORPS Y5, Y5, Y5             \
	VXORPS Y6, Y6, Y6             \
	VXORPS Y7, Y7, Y7

#define FSTORE4 \
	VADDPS       Y4, Y0, Y0       \
	VADDPS       Y5, Y1, Y1       \
	VADDPS       Y6, Y2, Y2       \
	VADDPS       Y7, Y3, Y3       \
	MOVQ         out+64(FP), AX   \
	VHADDPS      Y1, Y0, Y0       \
	VHADDPS      Y3, Y2, Y2       \
	VHADDPS      Y2, Y0, Y0       \
	VEXTRACTF128 $1, Y0, X1       \
	VADDPS       X1, X0, X0       \
	VMOVUPS      X0, (AX)         \
	VZEROUPPER                    \
	RET

// F32ROWS: weights in Y8 (values 0..7) and Y9 (8..15).
#define F32ROWS \
	VFMADD231PS (DI), Y8, Y0             \
	VFMADD231PS 32(DI), Y9, Y4           \
	VFMADD231PS (DI)(R8*1), Y8, Y1       \
	VFMADD231PS 32(DI)(R8*1), Y9, Y5     \
	VFMADD231PS (DI)(R8*2), Y8, Y2       \
	VFMADD231PS 32(DI)(R8*2), Y9, Y6     \
	VFMADD231PS (DI)(R9*1), Y8, Y3       \
	VFMADD231PS 32(DI)(R9*1), Y9, Y7

// func dot4F32AVX2Main(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4F32AVX2Main(SB), NOSPLIT, $0-72
	FARGS4
	TESTQ CX, CX
	JZ    f324done

f324loop:
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	F32ROWS
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  f324loop

f324done:
	FSTORE4

// func dot4F16AVX2Main(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4F16AVX2Main(SB), NOSPLIT, $0-72
	FARGS4
	TESTQ CX, CX
	JZ    f164done

f164loop:
	VCVTPH2PS (SI), Y8
	VCVTPH2PS 16(SI), Y9
	VCVTPH2PS   (DI), Y10
	VCVTPH2PS   16(DI), Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y9, Y4
	VCVTPH2PS   (DI)(R8*1), Y10
	VCVTPH2PS   16(DI)(R8*1), Y11
	VFMADD231PS Y10, Y8, Y1
	VFMADD231PS Y11, Y9, Y5
	VCVTPH2PS   (DI)(R8*2), Y10
	VCVTPH2PS   16(DI)(R8*2), Y11
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y11, Y9, Y6
	VCVTPH2PS   (DI)(R9*1), Y10
	VCVTPH2PS   16(DI)(R9*1), Y11
	VFMADD231PS Y10, Y8, Y3
	VFMADD231PS Y11, Y9, Y7
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  f164loop

f164done:
	FSTORE4

#define BF16LOAD(a, y) VPMOVZXWD a, y; VPSLLD $16, y, y

// func dot4BF16AVX2Main(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4BF16AVX2Main(SB), NOSPLIT, $0-72
	FARGS4
	TESTQ CX, CX
	JZ    bf164done

bf164loop:
	BF16LOAD((SI), Y8)
	BF16LOAD(16(SI), Y9)
	BF16LOAD((DI), Y10)
	BF16LOAD(16(DI), Y11)
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y9, Y4
	BF16LOAD((DI)(R8*1), Y10)
	BF16LOAD(16(DI)(R8*1), Y11)
	VFMADD231PS Y10, Y8, Y1
	VFMADD231PS Y11, Y9, Y5
	BF16LOAD((DI)(R8*2), Y10)
	BF16LOAD(16(DI)(R8*2), Y11)
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y11, Y9, Y6
	BF16LOAD((DI)(R9*1), Y10)
	BF16LOAD(16(DI)(R9*1), Y11)
	VFMADD231PS Y10, Y8, Y3
	VFMADD231PS Y11, Y9, Y7
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  bf164loop

bf164done:
	FSTORE4
