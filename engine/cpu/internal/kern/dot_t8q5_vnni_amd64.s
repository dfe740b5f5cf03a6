//go:build amd64 && !noasm

#include "textflag.h"

// Eight-activation-row matmul kernel (prefill) of Q5_K against Q8_K for
// AVX-512 VNNI: dotT8Q5_KVNNI(n, w, a, stride, sc, out, ostride) writes to
// out[r·ostride] the dot product of the weight row w with the activation row
// a + r·stride, r = 0..7, the activation scales as float32 in sc (transposed,
// see actScales). Each weight super-block's scales, mins and nibbles are
// decoded once for the eight rows; the eight rows' int32 lane sums live in
// Y16..Y23 (AVX-512 VL registers) and take each sub-block's scaled products
// with VPDPWSSD (VNNI: madd of int16 pairs added into the dword, the
// VPMADDWD + VPADDD of the AVX2 kernels in one instruction). Every row gets
// exactly the float32 operations of dotQ5_KAVX2, in the same order: the
// scalar min accumulator fnmadd(dmin·d_a, float(Σ madd(mins, hadd(bsums))))
// and acc = fma(d_w·d_a, float(lanes), acc) per super-block, hsum_float_8 of
// acc plus the min accumulator at the end. The fifth bit of each value comes
// from qh (bit 2j for the low nibbles of chunk j, 2j+1 for the high).
//
// Registers: SI weights, DI activations of row 0, R8 stride, R9 3·stride,
// R10 5·stride, R11 7·stride, BX scales, CX super-blocks, Y0..Y7 row
// accumulators, Y16..Y23 row lane sums, Y15 decoded scales and mins, Y14
// bytes 0x0F, Y8..Y13 temporaries. Stack: 0 the eight d_w·d_a, 32 the eight
// dmin·d_a, 64 the eight scalar min accumulators.

#define HSUMX(y, x, t) \
	VEXTRACTF128 $1, y, t      \
	VADDPS       t, x, x       \
	VMOVHLPS     x, x, t       \
	VADDPS       t, x, x       \
	VMOVSHDUP    x, t          \
	VADDSS       t, x, x

#define RED4(x, t) \
	VMOVHLPS     x, x, t       \
	VADDPS       t, x, x       \
	VMOVSHDUP    x, t          \
	VADDSS       t, x, x

// KSCT: the super-block's 8 scales (low half) and 8 mins (high half) as
// int16 in Y15 (AX, DX, R12, R13 scratch), the same values as KSCALES.
#define KSCT \
	MOVL  12(SI), R12          \
	MOVL  R12, AX              \
	SHRL  $4, AX               \
	ANDL  $0x0f0f0f0f, AX      \
	MOVL  8(SI), DX            \
	MOVL  DX, R13              \
	SHRL  $6, R13              \
	ANDL  $0x03030303, R13     \
	SHLL  $4, R13              \
	ORL   R13, AX              \
	ANDL  $0x3f3f3f3f, DX      \
	ANDL  $0x0f0f0f0f, R12     \
	MOVL  4(SI), R13           \
	SHRL  $6, R13              \
	ANDL  $0x03030303, R13     \
	SHLL  $4, R13              \
	ORL   R13, R12             \
	MOVL  4(SI), R13           \
	ANDL  $0x3f3f3f3f, R13     \
	SHLQ  $32, R12             \
	ORQ   R12, R13             \
	SHLQ  $32, AX              \
	ORQ   AX, DX               \
	VMOVQ R13, X15             \
	VPINSRQ $1, DX, X15, X15   \
	VPMOVZXBW X15, Y15

// func dotT8Q5_KVNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)
TEXT ·dotT8Q5_KVNNI(SB), NOSPLIT, $192-120
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	MOVQ stride+56(FP), R8
	MOVQ sc_base+64(FP), BX
	LEAQ (R8)(R8*2), R9
	LEAQ (R8)(R8*4), R10
	LEAQ (R9)(R8*4), R11
	SHRQ $8, CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	VXORPS Y8, Y8, Y8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VMOVUPS Y8, 64(SP)
	TESTQ CX, CX
	JZ    t8q5kdone

t8q5kloop:
	KSCT
	VPBROADCASTW 0(SI), X12
	VCVTPH2PS    X12, Y12
	VMULPS       (BX), Y12, Y12
	VMOVUPS      Y12, 0(SP)
	VPBROADCASTW 2(SI), X12
	VCVTPH2PS    X12, Y12
	VMULPS       (BX), Y12, Y12
	VMOVUPS      Y12, 32(SP)
	VEXTRACTI128 $1, Y15, X13
	VMOVDQU      260(DI), Y8
	VEXTRACTI128 $1, Y8, X9
	VPHADDW      X9, X8, X8
	VPMADDWD     X13, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	VMOVSS       32(SP), X9
	VMOVSS       64(SP), X10
	VFNMADD231SS X8, X9, X10
	VMOVSS       X10, 64(SP)
	VMOVDQU      260(DI)(R8*1), Y8
	VEXTRACTI128 $1, Y8, X9
	VPHADDW      X9, X8, X8
	VPMADDWD     X13, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	VMOVSS       36(SP), X9
	VMOVSS       68(SP), X10
	VFNMADD231SS X8, X9, X10
	VMOVSS       X10, 68(SP)
	VMOVDQU      260(DI)(R8*2), Y8
	VEXTRACTI128 $1, Y8, X9
	VPHADDW      X9, X8, X8
	VPMADDWD     X13, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	VMOVSS       40(SP), X9
	VMOVSS       72(SP), X10
	VFNMADD231SS X8, X9, X10
	VMOVSS       X10, 72(SP)
	VMOVDQU      260(DI)(R9*1), Y8
	VEXTRACTI128 $1, Y8, X9
	VPHADDW      X9, X8, X8
	VPMADDWD     X13, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	VMOVSS       44(SP), X9
	VMOVSS       76(SP), X10
	VFNMADD231SS X8, X9, X10
	VMOVSS       X10, 76(SP)
	VMOVDQU      260(DI)(R8*4), Y8
	VEXTRACTI128 $1, Y8, X9
	VPHADDW      X9, X8, X8
	VPMADDWD     X13, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	VMOVSS       48(SP), X9
	VMOVSS       80(SP), X10
	VFNMADD231SS X8, X9, X10
	VMOVSS       X10, 80(SP)
	VMOVDQU      260(DI)(R10*1), Y8
	VEXTRACTI128 $1, Y8, X9
	VPHADDW      X9, X8, X8
	VPMADDWD     X13, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	VMOVSS       52(SP), X9
	VMOVSS       84(SP), X10
	VFNMADD231SS X8, X9, X10
	VMOVSS       X10, 84(SP)
	VMOVDQU      260(DI)(R9*2), Y8
	VEXTRACTI128 $1, Y8, X9
	VPHADDW      X9, X8, X8
	VPMADDWD     X13, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	VMOVSS       56(SP), X9
	VMOVSS       88(SP), X10
	VFNMADD231SS X8, X9, X10
	VMOVSS       X10, 88(SP)
	VMOVDQU      260(DI)(R11*1), Y8
	VEXTRACTI128 $1, Y8, X9
	VPHADDW      X9, X8, X8
	VPMADDWD     X13, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	VMOVSS       60(SP), X9
	VMOVSS       92(SP), X10
	VFNMADD231SS X8, X9, X10
	VMOVSS       X10, 92(SP)
	VPERMQ       $0x44, Y15, Y15
	VPXORD       Y16, Y16, Y16
	VPXORD       Y17, Y17, Y17
	VPXORD       Y18, Y18, Y18
	VPXORD       Y19, Y19, Y19
	VPXORD       Y20, Y20, Y20
	VPXORD       Y21, Y21, Y21
	VPXORD       Y22, Y22, Y22
	VPXORD       Y23, Y23, Y23
	VMOVDQU      48(SI), Y8
	VPSRLW       $4, Y8, Y9
	VPAND        Y14, Y8, Y8
	VPAND        Y14, Y9, Y9
	VMOVDQU      16(SI), Y12
	VPSLLW       $4, Y12, Y12
	VPAND        t8k5b10<>(SB), Y12, Y12
	VPOR         Y12, Y8, Y8
	VMOVDQU      16(SI), Y12
	VPSLLW       $3, Y12, Y12
	VPAND        t8k5b10<>(SB), Y12, Y12
	VPOR         Y12, Y9, Y9
	VPSHUFB      t8k5shuf<>+0(SB), Y15, Y10
	VPSHUFB      t8k5shuf<>+32(SB), Y15, Y11
	VPMADDUBSW   4(DI), Y8, Y12
	VPDPWSSD     Y10, Y12, Y16
	VPMADDUBSW   36(DI), Y9, Y13
	VPDPWSSD     Y11, Y13, Y16
	VPMADDUBSW   4(DI)(R8*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y17
	VPMADDUBSW   36(DI)(R8*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y17
	VPMADDUBSW   4(DI)(R8*2), Y8, Y12
	VPDPWSSD     Y10, Y12, Y18
	VPMADDUBSW   36(DI)(R8*2), Y9, Y13
	VPDPWSSD     Y11, Y13, Y18
	VPMADDUBSW   4(DI)(R9*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y19
	VPMADDUBSW   36(DI)(R9*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y19
	VPMADDUBSW   4(DI)(R8*4), Y8, Y12
	VPDPWSSD     Y10, Y12, Y20
	VPMADDUBSW   36(DI)(R8*4), Y9, Y13
	VPDPWSSD     Y11, Y13, Y20
	VPMADDUBSW   4(DI)(R10*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y21
	VPMADDUBSW   36(DI)(R10*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y21
	VPMADDUBSW   4(DI)(R9*2), Y8, Y12
	VPDPWSSD     Y10, Y12, Y22
	VPMADDUBSW   36(DI)(R9*2), Y9, Y13
	VPDPWSSD     Y11, Y13, Y22
	VPMADDUBSW   4(DI)(R11*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y23
	VPMADDUBSW   36(DI)(R11*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y23
	VMOVDQU      80(SI), Y8
	VPSRLW       $4, Y8, Y9
	VPAND        Y14, Y8, Y8
	VPAND        Y14, Y9, Y9
	VMOVDQU      16(SI), Y12
	VPSLLW       $2, Y12, Y12
	VPAND        t8k5b10<>(SB), Y12, Y12
	VPOR         Y12, Y8, Y8
	VMOVDQU      16(SI), Y12
	VPSLLW       $1, Y12, Y12
	VPAND        t8k5b10<>(SB), Y12, Y12
	VPOR         Y12, Y9, Y9
	VPSHUFB      t8k5shuf<>+64(SB), Y15, Y10
	VPSHUFB      t8k5shuf<>+96(SB), Y15, Y11
	VPMADDUBSW   68(DI), Y8, Y12
	VPDPWSSD     Y10, Y12, Y16
	VPMADDUBSW   100(DI), Y9, Y13
	VPDPWSSD     Y11, Y13, Y16
	VPMADDUBSW   68(DI)(R8*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y17
	VPMADDUBSW   100(DI)(R8*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y17
	VPMADDUBSW   68(DI)(R8*2), Y8, Y12
	VPDPWSSD     Y10, Y12, Y18
	VPMADDUBSW   100(DI)(R8*2), Y9, Y13
	VPDPWSSD     Y11, Y13, Y18
	VPMADDUBSW   68(DI)(R9*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y19
	VPMADDUBSW   100(DI)(R9*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y19
	VPMADDUBSW   68(DI)(R8*4), Y8, Y12
	VPDPWSSD     Y10, Y12, Y20
	VPMADDUBSW   100(DI)(R8*4), Y9, Y13
	VPDPWSSD     Y11, Y13, Y20
	VPMADDUBSW   68(DI)(R10*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y21
	VPMADDUBSW   100(DI)(R10*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y21
	VPMADDUBSW   68(DI)(R9*2), Y8, Y12
	VPDPWSSD     Y10, Y12, Y22
	VPMADDUBSW   100(DI)(R9*2), Y9, Y13
	VPDPWSSD     Y11, Y13, Y22
	VPMADDUBSW   68(DI)(R11*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y23
	VPMADDUBSW   100(DI)(R11*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y23
	VMOVDQU      112(SI), Y8
	VPSRLW       $4, Y8, Y9
	VPAND        Y14, Y8, Y8
	VPAND        Y14, Y9, Y9
	VMOVDQU      16(SI), Y12
	VPAND        t8k5b10<>(SB), Y12, Y12
	VPOR         Y12, Y8, Y8
	VMOVDQU      16(SI), Y12
	VPSRLW       $1, Y12, Y12
	VPAND        t8k5b10<>(SB), Y12, Y12
	VPOR         Y12, Y9, Y9
	VPSHUFB      t8k5shuf<>+128(SB), Y15, Y10
	VPSHUFB      t8k5shuf<>+160(SB), Y15, Y11
	VPMADDUBSW   132(DI), Y8, Y12
	VPDPWSSD     Y10, Y12, Y16
	VPMADDUBSW   164(DI), Y9, Y13
	VPDPWSSD     Y11, Y13, Y16
	VPMADDUBSW   132(DI)(R8*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y17
	VPMADDUBSW   164(DI)(R8*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y17
	VPMADDUBSW   132(DI)(R8*2), Y8, Y12
	VPDPWSSD     Y10, Y12, Y18
	VPMADDUBSW   164(DI)(R8*2), Y9, Y13
	VPDPWSSD     Y11, Y13, Y18
	VPMADDUBSW   132(DI)(R9*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y19
	VPMADDUBSW   164(DI)(R9*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y19
	VPMADDUBSW   132(DI)(R8*4), Y8, Y12
	VPDPWSSD     Y10, Y12, Y20
	VPMADDUBSW   164(DI)(R8*4), Y9, Y13
	VPDPWSSD     Y11, Y13, Y20
	VPMADDUBSW   132(DI)(R10*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y21
	VPMADDUBSW   164(DI)(R10*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y21
	VPMADDUBSW   132(DI)(R9*2), Y8, Y12
	VPDPWSSD     Y10, Y12, Y22
	VPMADDUBSW   164(DI)(R9*2), Y9, Y13
	VPDPWSSD     Y11, Y13, Y22
	VPMADDUBSW   132(DI)(R11*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y23
	VPMADDUBSW   164(DI)(R11*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y23
	VMOVDQU      144(SI), Y8
	VPSRLW       $4, Y8, Y9
	VPAND        Y14, Y8, Y8
	VPAND        Y14, Y9, Y9
	VMOVDQU      16(SI), Y12
	VPSRLW       $2, Y12, Y12
	VPAND        t8k5b10<>(SB), Y12, Y12
	VPOR         Y12, Y8, Y8
	VMOVDQU      16(SI), Y12
	VPSRLW       $3, Y12, Y12
	VPAND        t8k5b10<>(SB), Y12, Y12
	VPOR         Y12, Y9, Y9
	VPSHUFB      t8k5shuf<>+192(SB), Y15, Y10
	VPSHUFB      t8k5shuf<>+224(SB), Y15, Y11
	VPMADDUBSW   196(DI), Y8, Y12
	VPDPWSSD     Y10, Y12, Y16
	VPMADDUBSW   228(DI), Y9, Y13
	VPDPWSSD     Y11, Y13, Y16
	VPMADDUBSW   196(DI)(R8*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y17
	VPMADDUBSW   228(DI)(R8*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y17
	VPMADDUBSW   196(DI)(R8*2), Y8, Y12
	VPDPWSSD     Y10, Y12, Y18
	VPMADDUBSW   228(DI)(R8*2), Y9, Y13
	VPDPWSSD     Y11, Y13, Y18
	VPMADDUBSW   196(DI)(R9*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y19
	VPMADDUBSW   228(DI)(R9*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y19
	VPMADDUBSW   196(DI)(R8*4), Y8, Y12
	VPDPWSSD     Y10, Y12, Y20
	VPMADDUBSW   228(DI)(R8*4), Y9, Y13
	VPDPWSSD     Y11, Y13, Y20
	VPMADDUBSW   196(DI)(R10*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y21
	VPMADDUBSW   228(DI)(R10*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y21
	VPMADDUBSW   196(DI)(R9*2), Y8, Y12
	VPDPWSSD     Y10, Y12, Y22
	VPMADDUBSW   228(DI)(R9*2), Y9, Y13
	VPDPWSSD     Y11, Y13, Y22
	VPMADDUBSW   196(DI)(R11*1), Y8, Y12
	VPDPWSSD     Y10, Y12, Y23
	VPMADDUBSW   228(DI)(R11*1), Y9, Y13
	VPDPWSSD     Y11, Y13, Y23
	VCVTDQ2PS    Y16, Y16
	VFMADD231PS.BCST 0(SP), Y16, Y0
	VCVTDQ2PS    Y17, Y17
	VFMADD231PS.BCST 4(SP), Y17, Y1
	VCVTDQ2PS    Y18, Y18
	VFMADD231PS.BCST 8(SP), Y18, Y2
	VCVTDQ2PS    Y19, Y19
	VFMADD231PS.BCST 12(SP), Y19, Y3
	VCVTDQ2PS    Y20, Y20
	VFMADD231PS.BCST 16(SP), Y20, Y4
	VCVTDQ2PS    Y21, Y21
	VFMADD231PS.BCST 20(SP), Y21, Y5
	VCVTDQ2PS    Y22, Y22
	VFMADD231PS.BCST 24(SP), Y22, Y6
	VCVTDQ2PS    Y23, Y23
	VFMADD231PS.BCST 28(SP), Y23, Y7
	ADDQ $176, SI
	ADDQ $292, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  t8q5kloop

t8q5kdone:
	MOVQ out_base+88(FP), AX
	MOVQ ostride+112(FP), R12
	SHLQ $2, R12

	HSUMX(Y0, X0, X12)
	VADDSS 64(SP), X0, X0
	VMOVSS X0, (AX)
	ADDQ R12, AX
	HSUMX(Y1, X1, X12)
	VADDSS 68(SP), X1, X1
	VMOVSS X1, (AX)
	ADDQ R12, AX
	HSUMX(Y2, X2, X12)
	VADDSS 72(SP), X2, X2
	VMOVSS X2, (AX)
	ADDQ R12, AX
	HSUMX(Y3, X3, X12)
	VADDSS 76(SP), X3, X3
	VMOVSS X3, (AX)
	ADDQ R12, AX
	HSUMX(Y4, X4, X12)
	VADDSS 80(SP), X4, X4
	VMOVSS X4, (AX)
	ADDQ R12, AX
	HSUMX(Y5, X5, X12)
	VADDSS 84(SP), X5, X5
	VMOVSS X5, (AX)
	ADDQ R12, AX
	HSUMX(Y6, X6, X12)
	VADDSS 88(SP), X6, X6
	VMOVSS X6, (AX)
	ADDQ R12, AX
	HSUMX(Y7, X7, X12)
	VADDSS 92(SP), X7, X7
	VMOVSS X7, (AX)
	VZEROUPPER
	RET

DATA t8k5shuf<>+0(SB)/8, $0x100010001000100
DATA t8k5shuf<>+8(SB)/8, $0x100010001000100
DATA t8k5shuf<>+16(SB)/8, $0x100010001000100
DATA t8k5shuf<>+24(SB)/8, $0x100010001000100
DATA t8k5shuf<>+32(SB)/8, $0x302030203020302
DATA t8k5shuf<>+40(SB)/8, $0x302030203020302
DATA t8k5shuf<>+48(SB)/8, $0x302030203020302
DATA t8k5shuf<>+56(SB)/8, $0x302030203020302
DATA t8k5shuf<>+64(SB)/8, $0x504050405040504
DATA t8k5shuf<>+72(SB)/8, $0x504050405040504
DATA t8k5shuf<>+80(SB)/8, $0x504050405040504
DATA t8k5shuf<>+88(SB)/8, $0x504050405040504
DATA t8k5shuf<>+96(SB)/8, $0x706070607060706
DATA t8k5shuf<>+104(SB)/8, $0x706070607060706
DATA t8k5shuf<>+112(SB)/8, $0x706070607060706
DATA t8k5shuf<>+120(SB)/8, $0x706070607060706
DATA t8k5shuf<>+128(SB)/8, $0x908090809080908
DATA t8k5shuf<>+136(SB)/8, $0x908090809080908
DATA t8k5shuf<>+144(SB)/8, $0x908090809080908
DATA t8k5shuf<>+152(SB)/8, $0x908090809080908
DATA t8k5shuf<>+160(SB)/8, $0xb0a0b0a0b0a0b0a
DATA t8k5shuf<>+168(SB)/8, $0xb0a0b0a0b0a0b0a
DATA t8k5shuf<>+176(SB)/8, $0xb0a0b0a0b0a0b0a
DATA t8k5shuf<>+184(SB)/8, $0xb0a0b0a0b0a0b0a
DATA t8k5shuf<>+192(SB)/8, $0xd0c0d0c0d0c0d0c
DATA t8k5shuf<>+200(SB)/8, $0xd0c0d0c0d0c0d0c
DATA t8k5shuf<>+208(SB)/8, $0xd0c0d0c0d0c0d0c
DATA t8k5shuf<>+216(SB)/8, $0xd0c0d0c0d0c0d0c
DATA t8k5shuf<>+224(SB)/8, $0xf0e0f0e0f0e0f0e
DATA t8k5shuf<>+232(SB)/8, $0xf0e0f0e0f0e0f0e
DATA t8k5shuf<>+240(SB)/8, $0xf0e0f0e0f0e0f0e
DATA t8k5shuf<>+248(SB)/8, $0xf0e0f0e0f0e0f0e
GLOBL t8k5shuf<>(SB), RODATA|NOPTR, $256
DATA t8k5b10<>+0(SB)/8, $0x1010101010101010
DATA t8k5b10<>+8(SB)/8, $0x1010101010101010
DATA t8k5b10<>+16(SB)/8, $0x1010101010101010
DATA t8k5b10<>+24(SB)/8, $0x1010101010101010
GLOBL t8k5b10<>(SB), RODATA|NOPTR, $32
