//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// TQ1_0 · Q8_K in ggml-cpu's AVX2 arithmetic. TQ1_0 packs five ternary
// digits per byte (qs[48]) and four per byte (qh[4]) in base 3; digit l of a
// byte x is ((x·3^l mod 256)·3) >> 8. Here x·3^l comes from byte additions
// and masked shifts (×3 = x+x+x, ×9 = (x<<3)+x), and the ×3>>8 from the
// rounding-average identity avg(q', avg(q', 0)) >> 6 with q' = q −sat 1,
// which equals (q·3) >> 8 for every byte. The digits (0..2) multiply the
// activations with VPMADDUBSW into int16 sums; Σ(t−1)·a subtracts Q8_K's
// bsums lane by lane as ggml does; then madd(ones), fma with d_w·d_a, and
// hsum_float_8.


// TRIT turns x·3^l (bytes in q) into its ternary digit, in place (t scratch;
// Y14 bytes 0x01, Y13 bytes 0x03, Y12 zero).
#define TRIT(q, t) \
	VPSUBUSB Y14, q, q         \
	VPAVGB   Y12, q, t         \
	VPAVGB   t, q, q           \
	VPSRLW   $6, q, q          \
	VPAND    Y13, q, q

// TIMES9 sets dst = 9·src in every byte (Y15 bytes 0xF8).
#define TIMES9(src, dst) \
	VPSLLW $3, src, dst        \
	VPAND  Y15, dst, dst       \
	VPADDB src, dst, dst

#define TIMES9X(src, dst) \
	VPSLLW $3, src, dst        \
	VPAND  X15, dst, dst       \
	VPADDB src, dst, dst

// func dotTQ1_0AVX2(n int, w, a []byte) float32
TEXT ·dotTQ1_0AVX2(SB), NOSPLIT, $0-60
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	SHRQ $8, CX
	VXORPS   Y0, Y0, Y0
	VPXOR    Y12, Y12, Y12
	MOVL     $0x01010101, AX
	VMOVD    AX, X14
	VPBROADCASTD X14, Y14
	MOVL     $0x03030303, AX
	VMOVD    AX, X13
	VPBROADCASTD X13, Y13
	MOVL     $0xf8f8f8f8, AX
	VMOVD    AX, X15
	VPBROADCASTD X15, Y15
	VPCMPEQW Y11, Y11, Y11
	VPSRLW   $15, Y11, Y11
	TESTQ CX, CX
	JZ    tq1done

tq1loop:
	// first 32 bytes: five digits each, against activations 0..159
	VMOVDQU    (SI), Y1
	VPADDB     Y1, Y1, Y2
	VPADDB     Y1, Y2, Y2
	TIMES9(Y1, Y3)
	TIMES9(Y2, Y4)
	TIMES9(Y3, Y5)
	TRIT(Y1, Y6)
	TRIT(Y2, Y6)
	TRIT(Y3, Y6)
	TRIT(Y4, Y6)
	TRIT(Y5, Y6)
	VPMADDUBSW 4(DI), Y1, Y1
	VPMADDUBSW 36(DI), Y2, Y2
	VPMADDUBSW 68(DI), Y3, Y3
	VPMADDUBSW 100(DI), Y4, Y4
	VPMADDUBSW 132(DI), Y5, Y5
	VPADDW     Y2, Y1, Y6
	VPADDW     Y4, Y3, Y7
	VMOVDQA    Y5, Y8
	// last 16 bytes (five digits) and qh (four digits): activations 160..255
	VMOVDQU    32(SI), X1
	VPADDB     X1, X1, X2
	VPADDB     X1, X2, X2
	TIMES9X(X1, X3)
	TIMES9X(X2, X4)
	TIMES9X(X3, X5)
	VPBROADCASTD 48(SI), X9
	VPMOVZXBW  X9, Y9
	VPMULLW    tq1Pow3<>(SB), Y9, Y9
	VPAND      tq1Low<>(SB), Y9, Y9
	VEXTRACTI128 $1, Y9, X10
	VPACKUSWB  X10, X9, X9
	VINSERTI128 $1, X2, Y1, Y1
	VINSERTI128 $1, X4, Y3, Y3
	VINSERTI128 $1, X9, Y5, Y5
	TRIT(Y1, Y2)
	TRIT(Y3, Y2)
	TRIT(Y5, Y2)
	VPMADDUBSW 164(DI), Y1, Y1
	VPMADDUBSW 196(DI), Y3, Y3
	VPMADDUBSW 228(DI), Y5, Y5
	VPADDW     Y1, Y6, Y6
	VPADDW     Y3, Y7, Y7
	VPADDW     Y5, Y8, Y8
	// Σ(t−1)·a: subtract the bsums lane by lane, then widen
	VPSUBW     260(DI), Y6, Y6
	VPADDW     Y8, Y7, Y7
	VPADDW     Y7, Y6, Y6
	VPMADDWD   Y11, Y6, Y6
	VCVTDQ2PS  Y6, Y6
	VPBROADCASTW 52(SI), X10
	VCVTPH2PS  X10, Y10
	VBROADCASTSS (DI), Y9
	VMULPS     Y10, Y9, Y9
	VFMADD231PS Y6, Y9, Y0
	ADDQ $54, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  tq1loop

tq1done:
	HSUMX(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// tq1Pow3: the multipliers of qh's four digits, one per group of four words.
DATA tq1Pow3<>+0(SB)/8, $0x0001000100010001
DATA tq1Pow3<>+8(SB)/8, $0x0003000300030003
DATA tq1Pow3<>+16(SB)/8, $0x0009000900090009
DATA tq1Pow3<>+24(SB)/8, $0x001b001b001b001b
GLOBL tq1Pow3<>(SB), RODATA|NOPTR, $32
DATA tq1Low<>+0(SB)/8, $0x00ff00ff00ff00ff
DATA tq1Low<>+8(SB)/8, $0x00ff00ff00ff00ff
DATA tq1Low<>+16(SB)/8, $0x00ff00ff00ff00ff
DATA tq1Low<>+24(SB)/8, $0x00ff00ff00ff00ff
GLOBL tq1Low<>(SB), RODATA|NOPTR, $32
