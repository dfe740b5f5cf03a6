//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// Float kernels (F32, F16, BF16): single-row dot<T>AVX2Main and four-row
// dot4<T>AVX2Main, n a multiple of 8 (the Go wrappers add the tail). Every
// row has one eight-lane float32 accumulator, acc = fma(w, a, acc) over the
// values in order, reduced by hsum_float_8: the order of ggml-cpu's AVX2
// tinyBLAS (llamafile_sgemm), which llama.cpp uses for these types, so the
// single-row and four-row results are identical.


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




#define ARGS8 \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ a_base+32(FP), DI     \
	MOVQ stride+56(FP), R8     \
	LEAQ (R8)(R8*2), R9        \
	LEAQ (R8)(R8*4), R10       \
	LEAQ (R9)(R8*4), R11       \
	SHRQ $3, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3          \
	VXORPS Y4, Y4, Y4          \
	VXORPS Y5, Y5, Y5          \
	VXORPS Y6, Y6, Y6          \
	VXORPS Y7, Y7, Y7

// STORE8 writes row r's hsum_float_8 to out[r·ostride].
#define STORE8 \
	MOVQ out_base+64(FP), AX   \
	MOVQ ostride+88(FP), R12   \
	SHLQ $2, R12               \
	LEAQ (R12)(R12*2), R13     \
	LEAQ (R12)(R12*4), BX      \
	LEAQ (R13)(R13*1), DX      \
	LEAQ (R13)(R12*4), R9      \
	HSUMX(Y0, X0, X12)         \
	VMOVSS X0, (AX)            \
	HSUMX(Y1, X1, X12)         \
	VMOVSS X1, (AX)(R12*1)     \
	HSUMX(Y2, X2, X12)         \
	VMOVSS X2, (AX)(R12*2)     \
	HSUMX(Y3, X3, X12)         \
	VMOVSS X3, (AX)(R13*1)     \
	HSUMX(Y4, X4, X12)         \
	VMOVSS X4, (AX)(R12*4)     \
	HSUMX(Y5, X5, X12)         \
	VMOVSS X5, (AX)(BX*1)      \
	HSUMX(Y6, X6, X12)         \
	VMOVSS X6, (AX)(DX*1)      \
	HSUMX(Y7, X7, X12)         \
	VMOVSS X7, (AX)(R9*1)

#define F16R(a, acc) VCVTPH2PS a, Y9; VFMADD231PS Y9, Y8, acc

#define BF16R(a, acc) BF16LOAD(a, Y9); VFMADD231PS Y9, Y8, acc

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

// ---- eight-row float kernels: eight independent accumulator chains, each
// row's operations those of the single-row kernel.



// func dot8F32AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot8F32AVX2Main(SB), NOSPLIT, $0-96
	ARGS8
	TESTQ CX, CX
	JZ    f328done

f328loop:
	VMOVUPS     (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (DI)(R8*1), Y8, Y1
	VFMADD231PS (DI)(R8*2), Y8, Y2
	VFMADD231PS (DI)(R9*1), Y8, Y3
	VFMADD231PS (DI)(R8*4), Y8, Y4
	VFMADD231PS (DI)(R10*1), Y8, Y5
	VFMADD231PS (DI)(R9*2), Y8, Y6
	VFMADD231PS (DI)(R11*1), Y8, Y7
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  f328loop

f328done:
	STORE8
	VZEROUPPER
	RET


// func dot8F16AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot8F16AVX2Main(SB), NOSPLIT, $0-96
	ARGS8
	TESTQ CX, CX
	JZ    f168done

f168loop:
	VCVTPH2PS (SI), Y8
	F16R((DI), Y0)
	F16R((DI)(R8*1), Y1)
	F16R((DI)(R8*2), Y2)
	F16R((DI)(R9*1), Y3)
	F16R((DI)(R8*4), Y4)
	F16R((DI)(R10*1), Y5)
	F16R((DI)(R9*2), Y6)
	F16R((DI)(R11*1), Y7)
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  f168loop

f168done:
	STORE8
	VZEROUPPER
	RET


// func dot8BF16AVX2Main(n int, w, a []byte, stride int, out []float32, ostride int)
TEXT ·dot8BF16AVX2Main(SB), NOSPLIT, $0-96
	ARGS8
	TESTQ CX, CX
	JZ    bf168done

bf168loop:
	BF16LOAD((SI), Y8)
	BF16R((DI), Y0)
	BF16R((DI)(R8*1), Y1)
	BF16R((DI)(R8*2), Y2)
	BF16R((DI)(R9*1), Y3)
	BF16R((DI)(R8*4), Y4)
	BF16R((DI)(R10*1), Y5)
	BF16R((DI)(R9*2), Y6)
	BF16R((DI)(R11*1), Y7)
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  bf168loop

bf168done:
	STORE8
	VZEROUPPER
	RET
