//go:build amd64 && !noasm

#include "textflag.h"

// Float kernels: F32 · F32, F16 · F16, BF16 · BF16, 32 values per iteration
// in four float32 FMA accumulators. n is a multiple of 32 here; the Go
// wrappers in dot_amd64.go add the tail.

#define HSUM8 VEXTRACTF128 $1, Y0, X1; VADDPS X1, X0, X0; VMOVHLPS X0, X0, X1; VADDPS X1, X0, X0; VMOVSHDUP X0, X1; VADDSS X1, X0, X0

#define FARGS \
	MOVQ n+0(FP), CX        \
	MOVQ w_base+8(FP), SI   \
	MOVQ a_base+32(FP), DI  \
	SHRQ $5, CX             \
	VXORPS Y0, Y0, Y0       \
	VXORPS Y1, Y1, Y1       \
	VXORPS Y2, Y2, Y2       \
	VXORPS Y3, Y3, Y3

#define FRESULT \
	VADDPS Y1, Y0, Y0       \
	VADDPS Y3, Y2, Y2       \
	VADDPS Y2, Y0, Y0       \
	HSUM8                   \
	VZEROUPPER              \
	MOVSS X0, ret+56(FP)    \
	RET

// func dotF32AVX2Main(n int, w, a []byte) float32
TEXT ·dotF32AVX2Main(SB), NOSPLIT, $0-60
	FARGS
	TESTQ CX, CX
	JZ    f32done

f32loop:
	VMOVUPS     0(SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS 0(DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  f32loop

f32done:
	FRESULT

#define F16STEP(off, acc) \
	VCVTPH2PS   off(SI), Y4   \
	VCVTPH2PS   off(DI), Y5   \
	VFMADD231PS Y5, Y4, acc

// func dotF16AVX2Main(n int, w, a []byte) float32
TEXT ·dotF16AVX2Main(SB), NOSPLIT, $0-60
	FARGS
	TESTQ CX, CX
	JZ    f16done

f16loop:
	F16STEP(0, Y0)
	F16STEP(16, Y1)
	F16STEP(32, Y2)
	F16STEP(48, Y3)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  f16loop

f16done:
	FRESULT

#define BF16STEP(off, acc) \
	VPMOVZXWD   off(SI), Y4   \
	VPSLLD      $16, Y4, Y4   \
	VPMOVZXWD   off(DI), Y5   \
	VPSLLD      $16, Y5, Y5   \
	VFMADD231PS Y5, Y4, acc

// func dotBF16AVX2Main(n int, w, a []byte) float32
TEXT ·dotBF16AVX2Main(SB), NOSPLIT, $0-60
	FARGS
	TESTQ CX, CX
	JZ    bf16done

bf16loop:
	BF16STEP(0, Y0)
	BF16STEP(16, Y1)
	BF16STEP(32, Y2)
	BF16STEP(48, Y3)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  bf16loop

bf16done:
	FRESULT
