//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// ggml_v_expf, ggml_v_silu, ggml_vec_swiglu_f32 and ggml_vec_soft_max_f32's
// AVX2+FMA loops over whole groups of 8 values (lengths are multiples of 8;
// elem.go does the tails). The operations are ggml's, in ggml's order, so
// every lane is bit for bit what ggml-cpu computes.

// VEXPF: Y0 = e^Y0 (ggml_v_expf). Y1..Y7 scratch; slow and done are labels
// for the lanes with |n| > 126 (the two-factor scale) and the exit.
#define VEXPF(slow, done) \
	VMOVAPS      Y0, Y1                     \
	VMOVUPS      elR<>(SB), Y2              \
	VFMADD231PS  elLog2e<>(SB), Y0, Y2      \
	VSUBPS       elR<>(SB), Y2, Y3          \
	VFNMADD231PS elLn2hi<>(SB), Y3, Y1      \
	VFNMADD231PS elLn2lo<>(SB), Y3, Y1      \
	VPSLLD       $23, Y2, Y4                \
	VPADDD       elOne<>(SB), Y4, Y5        \
	VMULPS       Y1, Y1, Y6                 \
	VMOVUPS      elP4<>(SB), Y7             \
	VFMADD213PS  elP3<>(SB), Y1, Y7         \
	VMOVUPS      elP2<>(SB), Y0             \
	VFMADD213PS  elP1<>(SB), Y1, Y0         \
	VFMADD213PS  Y0, Y6, Y7                 \
	VMULPS       elP0<>(SB), Y1, Y1         \
	VFMADD213PS  Y1, Y6, Y7                 \
	VANDPS       elAbs<>(SB), Y3, Y1        \
	VCMPPS       $0x1e, elC126<>(SB), Y1, Y6 \
	VMOVAPS      Y5, Y0                     \
	VFMADD213PS  Y5, Y7, Y0                 \
	VMOVMSKPS    Y6, AX                     \
	TESTL        AX, AX                     \
	JZ           done                       \
slow:                                       \
	VXORPS       Y2, Y2, Y2                 \
	VCMPPS       $0x12, Y2, Y3, Y2          \
	VANDPS       el82<>(SB), Y2, Y2         \
	VPADDD       el7f<>(SB), Y2, Y3         \
	VPSUBD       Y2, Y4, Y4                 \
	VMOVAPS      Y4, Y2                     \
	VFMADD213PS  Y4, Y7, Y2                 \
	VMULPS       Y3, Y2, Y2                 \
	VBLENDVPS    Y6, Y2, Y0, Y0             \
	VMULPS       Y3, Y3, Y2                 \
	VCMPPS       $0x1e, elC192<>(SB), Y1, Y6 \
	VBLENDVPS    Y6, Y2, Y0, Y0             \
done:

// VSILU: Y0 = Y0/(1 + e^(0 − Y0)) (ggml_v_silu); Y8 keeps x.
#define VSILU(slow, done) \
	VMOVAPS      Y0, Y8                     \
	VXORPS       Y9, Y9, Y9                 \
	VSUBPS       Y0, Y9, Y0                 \
	VEXPF(slow, done)                       \
	VADDPS       elOne<>(SB), Y0, Y0        \
	VDIVPS       Y0, Y8, Y0

// func siluGroupsAVX2(dst, x []float32)
TEXT ·siluGroupsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ x_len+32(FP), CX
	SHRQ $3, CX
	TESTQ CX, CX
	JZ    slend

slloop:
	VMOVUPS (SI), Y0
	VSILU(slslow, sldone)
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  slloop

slend:
	VZEROUPPER
	RET

// func swigluGroupsAVX2(dst, g, u []float32)
TEXT ·swigluGroupsAVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ g_base+24(FP), SI
	MOVQ u_base+48(FP), DX
	MOVQ dst_len+8(FP), CX
	SHRQ $3, CX
	TESTQ CX, CX
	JZ    swend

swloop:
	VMOVUPS (SI), Y0
	VSILU(swslow, swdone)
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  swloop

swend:
	VZEROUPPER
	RET

// func expSumGroupsAVX2(dst, x []float32, mx float32, valid int, sum float64) float64
// Lanes at index ≥ valid are set to 0 (the mask compares the lane index
// with valid − i, both as int32).
TEXT ·expSumGroupsAVX2(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ x_len+32(FP), CX
	VBROADCASTSS mx+48(FP), Y10
	MOVQ valid+56(FP), BX
	VMOVSD sum+64(FP), X11
	VMOVDQU elIota<>(SB), Y12
	SHRQ $3, CX
	TESTQ CX, CX
	JZ    exend

exloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y10, Y0, Y0
	VEXPF(exslow, exdone)
	CMPQ    BX, $8
	JGE     exfull
	// mask lanes ≥ valid (valid < 8 here; ≤ 0 masks all)
	MOVQ    BX, AX
	CMPQ    AX, $0
	JGE     expos
	XORQ    AX, AX
expos:
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	VPCMPGTD     Y12, Y13, Y13 // valid − i > lane
	VANDPS       Y13, Y0, Y0

exfull:
	VMOVUPS      Y0, (DI)
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X0, X1, X1
	VMOVHLPS     X1, X1, X2
	VADDPS       X2, X1, X1
	VMOVSHDUP    X1, X2
	VADDSS       X2, X1, X1
	VCVTSS2SD    X1, X1, X1
	VADDSD       X1, X11, X11
	SUBQ $8, BX
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  exloop

exend:
	VMOVSD X11, ret+72(FP)
	VZEROUPPER
	RET

#define CONST8(name, v) \
	DATA name+0(SB)/4, $v  \
	DATA name+4(SB)/4, $v  \
	DATA name+8(SB)/4, $v  \
	DATA name+12(SB)/4, $v \
	DATA name+16(SB)/4, $v \
	DATA name+20(SB)/4, $v \
	DATA name+24(SB)/4, $v \
	DATA name+28(SB)/4, $v \
	GLOBL name(SB), RODATA|NOPTR, $32

CONST8(elR<>, 0x4b400000)
CONST8(elLog2e<>, 0x3fb8aa3b)
CONST8(elLn2hi<>, 0x3f317200)
CONST8(elLn2lo<>, 0x35bfbe8e)
CONST8(elP4<>, 0x3c072010)
CONST8(elP3<>, 0x3d2b9f17)
CONST8(elP2<>, 0x3e2aaf33)
CONST8(elP1<>, 0x3efffedb)
CONST8(elP0<>, 0x3f7ffff6)
CONST8(elOne<>, 0x3f800000)
CONST8(elAbs<>, 0x7fffffff)
CONST8(elC126<>, 0x42fc0000)
CONST8(elC192<>, 0x43400000)
CONST8(el82<>, 0x82000000)
CONST8(el7f<>, 0x7f000000)

DATA elIota<>+0(SB)/4, $0
DATA elIota<>+4(SB)/4, $1
DATA elIota<>+8(SB)/4, $2
DATA elIota<>+12(SB)/4, $3
DATA elIota<>+16(SB)/4, $4
DATA elIota<>+20(SB)/4, $5
DATA elIota<>+24(SB)/4, $6
DATA elIota<>+28(SB)/4, $7
GLOBL elIota<>(SB), RODATA|NOPTR, $32
