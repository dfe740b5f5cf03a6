//go:build amd64 && !noasm

#include "textflag.h"

// Q8_0 · Q8_0.
//
// Per block: VPSIGNB moves the weight's sign onto the activation so that
// VPMADDUBSW can multiply |w| (unsigned) by a·sign(w) (signed) into int16
// pairs; VPMADDWD with ones widens to int32; the int32 sums become float32
// and are accumulated with d_w·d_a by VFMADD231PS. Activations are in
// [-127, 127] (the quantizers guarantee it), so no int16 pair saturates.

// ONES16 sets Y15 to sixteen int16 ones.
#define ONES16 VPCMPEQW Y15, Y15, Y15; VPSRLW $15, Y15, Y15

// HSUM8 reduces the eight float32 lanes of Y0 into X0's low lane.
#define HSUM8 VEXTRACTF128 $1, Y0, X1; VADDPS X1, X0, X0; VMOVHLPS X0, X0, X1; VADDPS X1, X0, X0; VMOVSHDUP X0, X1; VADDSS X1, X0, X0

// Q8BLOCK accumulates the Q8_0·Q8_0 block at off(SI), off(DI) into acc.
#define Q8BLOCK(off, acc) \
	VPBROADCASTW off(SI), X2     \
	VCVTPH2PS    X2, Y2          \
	VPBROADCASTW off(DI), X3     \
	VCVTPH2PS    X3, Y3          \
	VMULPS       Y3, Y2, Y2      \
	VMOVDQU      off+2(SI), Y4   \
	VMOVDQU      off+2(DI), Y5   \
	VPSIGNB      Y4, Y4, Y6      \
	VPSIGNB      Y4, Y5, Y5      \
	VPMADDUBSW   Y5, Y6, Y6      \
	VPMADDWD     Y15, Y6, Y6     \
	VCVTDQ2PS    Y6, Y6          \
	VFMADD231PS  Y6, Y2, acc

// func dotQ8_0AVX2(n int, w, a []byte) float32
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-60
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	ONES16

q8loop2:
	CMPQ CX, $2
	JB   q8tail
	Q8BLOCK(0, Y0)
	Q8BLOCK(34, Y1)
	ADDQ $68, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  q8loop2

q8tail:
	TESTQ CX, CX
	JZ    q8done
	Q8BLOCK(0, Y0)

q8done:
	VADDPS Y1, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// Q8ROW accumulates one activation row's block (scale at d, quants at q)
// against the weight block held in Y4 (d_w), Y5 (|w|), Y6 (w).
#define Q8ROW(d, q, acc) \
	VPBROADCASTW d, X7         \
	VCVTPH2PS    X7, Y7        \
	VMULPS       Y4, Y7, Y7    \
	VMOVDQU      q, Y8         \
	VPSIGNB      Y6, Y8, Y8    \
	VPMADDUBSW   Y8, Y5, Y8    \
	VPMADDWD     Y15, Y8, Y8   \
	VCVTDQ2PS    Y8, Y8        \
	VFMADD231PS  Y8, Y7, acc

// HSUM4 reduces Y0..Y3 to four float32 and stores them at (AX).
#define HSUM4 \
	VHADDPS      Y1, Y0, Y0    \
	VHADDPS      Y3, Y2, Y2    \
	VHADDPS      Y2, Y0, Y0    \
	VEXTRACTF128 $1, Y0, X1    \
	VADDPS       X1, X0, X0    \
	VMOVUPS      X0, (AX)

// func dot4Q8_0AVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4Q8_0AVX2(SB), NOSPLIT, $0-72
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	MOVQ stride+56(FP), R8
	MOVQ out+64(FP), AX
	LEAQ (R8)(R8*2), R9
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	ONES16

q84loop:
	VPBROADCASTW (SI), X4
	VCVTPH2PS    X4, Y4
	VMOVDQU      2(SI), Y6
	VPSIGNB      Y6, Y6, Y5
	Q8ROW((DI), 2(DI), Y0)
	Q8ROW((DI)(R8*1), 2(DI)(R8*1), Y1)
	Q8ROW((DI)(R8*2), 2(DI)(R8*2), Y2)
	Q8ROW((DI)(R9*1), 2(DI)(R9*1), Y3)
	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q84loop

	HSUM4
	VZEROUPPER
	RET
