//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// func convertF16AVX2(x []float32, dst []byte)
// len(x) is a multiple of 8; VCVTPS2PH with imm 0 rounds to nearest even.
TEXT ·convertF16AVX2(SB), NOSPLIT, $0-48
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ dst_base+24(FP), DI
	SHRQ $3, CX
	TESTQ CX, CX
	JZ    cvdone

cvloop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)
	ADDQ $32, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  cvloop

cvdone:
	VZEROUPPER
	RET

// func quantizeQ8_0AVX2(x []float32, dst []byte)
// ggml-cpu's x86 quantize_row_q8_0: per 32 values amax, d = amax/127 as
// fp16 (VCVTPS2PH, nearest even), id = 127/amax or 0, q = VCVTPS2DQ(x·id)
// (nearest even) packed with signed saturation. len(x) is a multiple of 32.
TEXT ·quantizeQ8_0AVX2(SB), NOSPLIT, $0-48
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ dst_base+24(FP), DI
	SHRQ $5, CX
	TESTQ CX, CX
	JZ    qdone
	// Y15: clear-sign mask; Y14: the dword permutation 0,4,1,5,2,6,3,7
	VPCMPEQD Y15, Y15, Y15
	VPSRLD   $1, Y15, Y15
	VMOVDQU  q8perm<>(SB), Y14
	MOVL     $0x42fe0000, AX // 127.0
	VMOVD    AX, X13

qloop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS  Y15, Y0, Y4
	VANDPS  Y15, Y1, Y5
	VMAXPS  Y5, Y4, Y4
	VANDPS  Y15, Y2, Y5
	VMAXPS  Y5, Y4, Y4
	VANDPS  Y15, Y3, Y5
	VMAXPS  Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS  X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS  X5, X4, X4
	VMOVSHDUP X4, X5
	VMAXSS  X5, X4, X4
	// d = amax / 127 → fp16
	VDIVSS    X13, X4, X6
	VCVTPS2PH $0, X6, X6
	VPEXTRW   $0, X6, AX
	MOVW      AX, (DI)
	// id = amax != 0 ? 127/amax : 0
	VXORPS   X7, X7, X7
	VUCOMISS X7, X4
	JNE      qdiv
	JPS      qdiv
	JMP      qzero

qdiv:
	VDIVSS   X4, X13, X7

qzero:
	VBROADCASTSS X7, Y7
	VMULPS    Y7, Y0, Y0
	VMULPS    Y7, Y1, Y1
	VMULPS    Y7, Y2, Y2
	VMULPS    Y7, Y3, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y14, Y0
	VMOVDQU   Y0, 2(DI)
	ADDQ $128, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  qloop

qdone:
	VZEROUPPER
	RET

DATA q8perm<>+0(SB)/4, $0
DATA q8perm<>+4(SB)/4, $4
DATA q8perm<>+8(SB)/4, $1
DATA q8perm<>+12(SB)/4, $5
DATA q8perm<>+16(SB)/4, $2
DATA q8perm<>+20(SB)/4, $6
DATA q8perm<>+24(SB)/4, $3
DATA q8perm<>+28(SB)/4, $7
GLOBL q8perm<>(SB), RODATA|NOPTR, $32
