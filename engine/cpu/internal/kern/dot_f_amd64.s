//go:build amd64 && !noasm

#include "textflag.h"

// Float kernels (F32, F16, BF16): single-row dot<T>AVX2Main and four-row
// dot4<T>AVX2Main, n a multiple of 8 (the Go wrappers add the tail). Every
// row has one eight-lane float32 accumulator, acc = fma(w, a, acc) over the
// values in order, reduced by hsum_float_8: the order of ggml-cpu's AVX2
// tinyBLAS (llamafile_sgemm), which llama.cpp uses for these types, so the
// single-row and four-row results are identical.

#define HSUMX(y, x, t) \
	VEXTRACTF128 $1, y, t      \
	VADDPS       t, x, x       \
	VMOVHLPS     x, x, t       \
	VADDPS       t, x, x       \
	VMOVSHDUP    x, t          \
	VADDSS       t, x, x

#define ARGS1 \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ a_base+32(FP), DI     \
	SHRQ $3, CX                \
	VXORPS Y0, Y0, Y0

#define ARGS4 \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ a_base+32(FP), DI     \
	MOVQ stride+56(FP), R8     \
	LEAQ (R8)(R8*2), R9        \
	SHRQ $3, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3

// STORE4 writes row r's result to out[r·ostride] (AX = out, R12 = ostride
// in bytes, R13 = 3·R12 afterwards).
#define STORE4 \
	MOVQ out_base+64(FP), AX   \
	MOVQ ostride+88(FP), R12   \
	SHLQ $2, R12               \
	LEAQ (R12)(R12*2), R13     \
	HSUMX(Y0, X0, X12)         \
	VMOVSS X0, (AX)            \
	HSUMX(Y1, X1, X12)         \
	VMOVSS X1, (AX)(R12*1)     \
	HSUMX(Y2, X2, X12)         \
	VMOVSS X2, (AX)(R12*2)     \
	HSUMX(Y3, X3, X12)         \
	VMOVSS X3, (AX)(R13*1)


#define BF16LOAD(a, y) VPMOVZXWD a, y; VPSLLD $16, y, y

// func dotF32AVX2Main(n int, w, a []byte) float32
TEXT ·dotF32AVX2Main(SB), NOSPLIT, $0-60
	ARGS1
	TESTQ CX, CX
	JZ    f32done

f32loop:
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  f32loop

f32done:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4F32AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4F32AVX2Main(SB), NOSPLIT, $0-96
	ARGS4
	TESTQ CX, CX
	JZ    f324done

f324loop:
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS (DI)(R8*1), Y4, Y1
	VFMADD231PS (DI)(R8*2), Y4, Y2
	VFMADD231PS (DI)(R9*1), Y4, Y3
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  f324loop

f324done:
	STORE4
	VZEROUPPER
	RET

// func dotF16AVX2Main(n int, w, a []byte) float32
TEXT ·dotF16AVX2Main(SB), NOSPLIT, $0-60
	ARGS1
	TESTQ CX, CX
	JZ    f16done

f16loop:
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   (DI), Y5
	VFMADD231PS Y5, Y4, Y0
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  f16loop

f16done:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4F16AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4F16AVX2Main(SB), NOSPLIT, $0-96
	ARGS4
	TESTQ CX, CX
	JZ    f164done

f164loop:
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   (DI), Y5
	VFMADD231PS Y5, Y4, Y0
	VCVTPH2PS   (DI)(R8*1), Y6
	VFMADD231PS Y6, Y4, Y1
	VCVTPH2PS   (DI)(R8*2), Y7
	VFMADD231PS Y7, Y4, Y2
	VCVTPH2PS   (DI)(R9*1), Y8
	VFMADD231PS Y8, Y4, Y3
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  f164loop

f164done:
	STORE4
	VZEROUPPER
	RET

// func dotBF16AVX2Main(n int, w, a []byte) float32
TEXT ·dotBF16AVX2Main(SB), NOSPLIT, $0-60
	ARGS1
	TESTQ CX, CX
	JZ    bf16done

bf16loop:
	BF16LOAD((SI), Y4)
	BF16LOAD((DI), Y5)
	VFMADD231PS Y5, Y4, Y0
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  bf16loop

bf16done:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// func dot4BF16AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot4BF16AVX2Main(SB), NOSPLIT, $0-96
	ARGS4
	TESTQ CX, CX
	JZ    bf164done

bf164loop:
	BF16LOAD((SI), Y4)
	BF16LOAD((DI), Y5)
	VFMADD231PS Y5, Y4, Y0
	BF16LOAD((DI)(R8*1), Y6)
	VFMADD231PS Y6, Y4, Y1
	BF16LOAD((DI)(R8*2), Y7)
	VFMADD231PS Y7, Y4, Y2
	BF16LOAD((DI)(R9*1), Y8)
	VFMADD231PS Y8, Y4, Y3
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  bf164loop

bf164done:
	STORE4
	VZEROUPPER
	RET
