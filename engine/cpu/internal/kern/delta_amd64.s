//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// REDUCE8: x = ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7)) of y, in lane 0.
#define REDUCE8(y, x, t) \
	VEXTRACTF128 $1, y, t \
	VADDPS       t, x, x  \
	VHADDPS      x, x, x  \
	VHADDPS      x, x, x

// func deltaRowAVX2(row, k, q []float32, decay, v, beta float32) float32
// Frame: row 0(FP) len 8, k 24(FP), q 48(FP), decay 72, v 76, beta 80, ret 88.
// Registers: SI row, DX k, DI q, CX n, BX n&^7, AX i; Y7 decay (all lanes).
TEXT ·deltaRowAVX2(SB), NOSPLIT, $0-92
	MOVQ row_base+0(FP), SI
	MOVQ row_len+8(FP), CX
	MOVQ k_base+24(FP), DX
	MOVQ q_base+48(FP), DI
	MOVQ CX, BX
	ANDQ $-8, BX
	VBROADCASTSS decay+72(FP), Y7

	// row ← decay·row (and the dot with k in the same pass: each lane's
	// product of the scaled value, added in element order)
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX
dk8:
	CMPQ    AX, BX
	JGE     dktail
	VMULPS  (SI)(AX*4), Y7, Y1
	VMOVUPS Y1, (SI)(AX*4)
	VMULPS  (DX)(AX*4), Y1, Y2
	VADDPS  Y2, Y0, Y0
	ADDQ    $8, AX
	JMP     dk8
dktail:
	// lanes to X0 = Σ in lane 0 plus the scalar tail (lane 0 takes it)
	VMOVSS decay+72(FP), X6
dktl:
	CMPQ   AX, CX
	JGE    dkred
	VMOVSS (SI)(AX*4), X1
	VMULSS X6, X1, X1
	VMOVSS X1, (SI)(AX*4)
	VMULSS (DX)(AX*4), X1, X2
	VADDSS X2, X0, X3          // lane 0 += p; upper lanes of X3 from X0
	VBLENDPS $1, Y3, Y0, Y0    // put lane 0 back, keep lanes 1..7
	INCQ   AX
	JMP    dktl
dkred:
	REDUCE8(Y0, X0, X1)
	// d = beta·(v − dk)
	VMOVSS v+76(FP), X1
	VSUBSS X0, X1, X1
	VMULSS beta+80(FP), X1, X1
	VBROADCASTSS X1, Y5        // Y5 = d

	// row ← row + d·k; dot with q
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX
dq8:
	CMPQ    AX, BX
	JGE     dqtail
	VMULPS  (DX)(AX*4), Y5, Y1
	VADDPS  (SI)(AX*4), Y1, Y1
	VMOVUPS Y1, (SI)(AX*4)
	VMULPS  (DI)(AX*4), Y1, Y2
	VADDPS  Y2, Y0, Y0
	ADDQ    $8, AX
	JMP     dq8
dqtail:
dqtl:
	CMPQ   AX, CX
	JGE    dqred
	VMOVSS (DX)(AX*4), X1
	VMULSS X5, X1, X1
	VADDSS (SI)(AX*4), X1, X1
	VMOVSS X1, (SI)(AX*4)
	VMULSS (DI)(AX*4), X1, X2
	VADDSS X2, X0, X3
	VBLENDPS $1, Y3, Y0, Y0
	INCQ   AX
	JMP    dqtl
dqred:
	REDUCE8(Y0, X0, X1)
	VMOVSS X0, ret+88(FP)
	VZEROUPPER
	RET
