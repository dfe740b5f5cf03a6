//go:build amd64 && !noasm

#include "textflag.h"

// Kernels for the 32-value block types that pair with Q8_0 or Q8_1
// activations: Q4_0, Q5_0, IQ4_NL, MXFP4 (signed weights: the VPSIGNB trick
// of dot_q8_amd64.s) and Q4_1, Q5_1 (unsigned weights: VPMADDUBSW directly,
// plus m_w·s_a per block).
//
// Registers: SI weights, DI activations, CX blocks left, Y0/Y1 float
// accumulators, Y15 int16 ones, Y14 bytes 0x0F.

#define ONES16 VPCMPEQW Y15, Y15, Y15; VPSRLW $15, Y15, Y15
#define BCASTB(v, reg, y) MOVL v, AX; VMOVD AX, reg; VPBROADCASTD reg, y
#define HSUM8 VEXTRACTF128 $1, Y0, X1; VADDPS X1, X0, X0; VMOVHLPS X0, X0, X1; VADDPS X1, X0, X0; VMOVSHDUP X0, X1; VADDSS X1, X0, X0

// NIBBLES32 loads 16 bytes at addr and leaves in Y4 the 32 nibbles in
// ggml's order: low nibbles (values 0..15) in the low lane, high nibbles
// (values 16..31) in the high lane. Clobbers Y7.
#define NIBBLES32(addr) \
	VMOVDQU     addr, X4           \
	VPSRLW      $4, X4, X7         \
	VINSERTI128 $1, X7, Y4, Y4     \
	VPAND       Y14, Y4, Y4

// SDOT32 accumulates d·Σ w·a for signed int8 weights in Y4 and activations
// at addr, with the scale product in Y2.
#define SDOT32(addr, acc) \
	VMOVDQU     addr, Y5      \
	VPSIGNB     Y4, Y4, Y6    \
	VPSIGNB     Y4, Y5, Y5    \
	VPMADDUBSW  Y5, Y6, Y6    \
	VPMADDWD    Y15, Y6, Y6   \
	VCVTDQ2PS   Y6, Y6        \
	VFMADD231PS Y6, Y2, acc

// DPROD sets Y2 to fp16(w)·fp16(a) in every lane.
#define DPROD(wd, ad) \
	VPBROADCASTW wd, X2   \
	VCVTPH2PS    X2, Y2   \
	VPBROADCASTW ad, X3   \
	VCVTPH2PS    X3, Y3   \
	VMULPS       Y3, Y2, Y2


// ---- Q4_0 · Q8_0 (18-byte blocks: fp16 d, 16 bytes of nibbles) ----------

#define Q40BLOCK(wo, ao, acc) \
	DPROD(wo(SI), ao(DI))          \
	NIBBLES32(wo+2(SI))      \
	VPSUBB  Y13, Y4, Y4            \
	SDOT32(ao+2(DI), acc)

// func dotQ4_0AVX2(n int, w, a []byte) float32
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-60
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	ONES16
	BCASTB($0x0f0f0f0f, X14, Y14)
	BCASTB($0x08080808, X13, Y13)

q40loop:
	CMPQ CX, $2
	JB   q40tail
	Q40BLOCK(0, 0, Y0)
	Q40BLOCK(18, 34, Y1)
	ADDQ $36, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  q40loop

q40tail:
	TESTQ CX, CX
	JZ    q40done
	Q40BLOCK(0, 0, Y0)

q40done:
	VADDPS Y1, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// ---- IQ4_NL · Q8_0 (18-byte blocks: fp16 d, 16 bytes of codebook indices) --

#define IQ4NLBLOCK(wo, ao, acc) \
	DPROD(wo(SI), ao(DI))          \
	NIBBLES32(wo+2(SI))      \
	VPSHUFB Y4, Y12, Y4            \
	SDOT32(ao+2(DI), acc)

// func dotIQ4_NLAVX2(n int, w, a []byte) float32
TEXT ·dotIQ4_NLAVX2(SB), NOSPLIT, $0-60
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	ONES16
	BCASTB($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y12

iq4nlloop:
	CMPQ CX, $2
	JB   iq4nltail
	IQ4NLBLOCK(0, 0, Y0)
	IQ4NLBLOCK(18, 34, Y1)
	ADDQ $36, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  iq4nlloop

iq4nltail:
	TESTQ CX, CX
	JZ    iq4nldone
	IQ4NLBLOCK(0, 0, Y0)

iq4nldone:
	VADDPS Y1, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// ---- MXFP4 · Q8_0 (17-byte blocks: E8M0 exponent, 16 bytes of E2M1 codes) --

#define MXFP4BLOCK(wo, ao, acc) \
	MOVBLZX      wo(SI), AX            \
	VBROADCASTSS (R10)(AX*4), Y2       \
	VPBROADCASTW ao(DI), X3            \
	VCVTPH2PS    X3, Y3                \
	VMULPS       Y3, Y2, Y2            \
	NIBBLES32(wo+1(SI))          \
	VPSHUFB Y4, Y12, Y4                \
	SDOT32(ao+2(DI), acc)

// func dotMXFP4AVX2(n int, w, a []byte) float32
TEXT ·dotMXFP4AVX2(SB), NOSPLIT, $0-60
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	ONES16
	BCASTB($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesMXFP4(SB), Y12
	LEAQ ·e8m0HalfTab(SB), R10

mxloop:
	CMPQ CX, $2
	JB   mxtail
	MXFP4BLOCK(0, 0, Y0)
	MXFP4BLOCK(17, 34, Y1)
	ADDQ $34, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  mxloop

mxtail:
	TESTQ CX, CX
	JZ    mxdone
	MXFP4BLOCK(0, 0, Y0)

mxdone:
	VADDPS Y1, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// ---- Q5_0 · Q8_0 (22-byte blocks: fp16 d, 32 high bits, 16 bytes of nibbles) --

// HIBITS32 spreads the 32 bits of the dword at addr over 32 bytes of Y7:
// 0xFF where the bit is set, 0 where clear (Y11 shuffle, Y10 bit masks,
// Y9 all ones).
#define HIBITS32(addr) \
	VPBROADCASTD addr, Y7         \
	VPSHUFB      Y11, Y7, Y7      \
	VPOR         Y10, Y7, Y7      \
	VPCMPEQB     Y9, Y7, Y7

#define Q50BLOCK(wo, ao, acc) \
	DPROD(wo(SI), ao(DI))          \
	NIBBLES32(wo+6(SI))      \
	HIBITS32(wo+2(SI))          \
	VPANDN  Y8, Y7, Y7             \
	VPOR    Y7, Y4, Y4             \
	SDOT32(ao+2(DI), acc)

// HIBITCONSTS loads Y11, Y10, Y9 for HIBITS32.
#define HIBITCONSTS \
	VMOVDQU   hibitShuf<>(SB), Y11    \
	MOVQ      $0x7fbfdfeff7fbfdfe, AX \
	VMOVQ     AX, X10                 \
	VPBROADCASTQ X10, Y10             \
	VPCMPEQB  Y9, Y9, Y9

// func dotQ5_0AVX2(n int, w, a []byte) float32
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-60
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	ONES16
	BCASTB($0x0f0f0f0f, X14, Y14)
	BCASTB($0xf0f0f0f0, X8, Y8)
	HIBITCONSTS

q50loop:
	CMPQ CX, $2
	JB   q50tail
	Q50BLOCK(0, 0, Y0)
	Q50BLOCK(22, 34, Y1)
	ADDQ $44, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  q50loop

q50tail:
	TESTQ CX, CX
	JZ    q50done
	Q50BLOCK(0, 0, Y0)

q50done:
	VADDPS Y1, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// ---- Q4_1 · Q8_1 and Q5_1 · Q8_1 -----------------------------------------
// Unsigned weights: VPMADDUBSW(q, a) directly. The per-block m_w·s_a terms
// are summed in X13 (scalar) and added at the end, as ggml does.

// UDOT32 accumulates d·Σ q·a for unsigned weights in Y4 and activations at addr.
#define UDOT32(addr, acc) \
	VMOVDQU     addr, Y5      \
	VPMADDUBSW  Y5, Y4, Y6    \
	VPMADDWD    Y15, Y6, Y6   \
	VCVTDQ2PS   Y6, Y6        \
	VFMADD231PS Y6, Y2, acc

// MINTERM adds fp16(w.m)·fp16(a.s) into X13.
#define MINTERM(wm, as) \
	VPBROADCASTW wm, X6        \
	VCVTPH2PS    X6, X6        \
	VPBROADCASTW as, X7        \
	VCVTPH2PS    X7, X7        \
	VFMADD231SS  X7, X6, X13

#define Q41BLOCK(wo, ao, acc) \
	DPROD(wo(SI), ao(DI))          \
	MINTERM(wo+2(SI), ao+2(DI))    \
	NIBBLES32(wo+4(SI))      \
	UDOT32(ao+4(DI), acc)

// func dotQ4_1AVX2(n int, w, a []byte) float32
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-60
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS X13, X13, X13
	ONES16
	BCASTB($0x0f0f0f0f, X14, Y14)

q41loop:
	CMPQ CX, $2
	JB   q41tail
	Q41BLOCK(0, 0, Y0)
	Q41BLOCK(20, 36, Y1)
	ADDQ $40, SI
	ADDQ $72, DI
	SUBQ $2, CX
	JMP  q41loop

q41tail:
	TESTQ CX, CX
	JZ    q41done
	Q41BLOCK(0, 0, Y0)

q41done:
	VADDPS Y1, Y0, Y0
	HSUM8
	VADDSS X13, X0, X0
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

#define Q51BLOCK(wo, ao, acc) \
	DPROD(wo(SI), ao(DI))          \
	MINTERM(wo+2(SI), ao+2(DI))    \
	NIBBLES32(wo+8(SI))      \
	HIBITS32(wo+4(SI))          \
	VPAND   Y8, Y7, Y7             \
	VPOR    Y7, Y4, Y4             \
	UDOT32(ao+4(DI), acc)

// func dotQ5_1AVX2(n int, w, a []byte) float32
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-60
	MOVQ n+0(FP), CX
	MOVQ w_base+8(FP), SI
	MOVQ a_base+32(FP), DI
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS X13, X13, X13
	ONES16
	BCASTB($0x0f0f0f0f, X14, Y14)
	BCASTB($0x10101010, X8, Y8)
	HIBITCONSTS

q51loop:
	CMPQ CX, $2
	JB   q51tail
	Q51BLOCK(0, 0, Y0)
	Q51BLOCK(24, 36, Y1)
	ADDQ $48, SI
	ADDQ $72, DI
	SUBQ $2, CX
	JMP  q51loop

q51tail:
	TESTQ CX, CX
	JZ    q51done
	Q51BLOCK(0, 0, Y0)

q51done:
	VADDPS Y1, Y0, Y0
	HSUM8
	VADDSS X13, X0, X0
	VZEROUPPER
	MOVSS X0, ret+56(FP)
	RET

// hibitShuf picks dword byte k/8 for byte k of each 16-byte lane (the dword
// is broadcast to both lanes, so the high lane picks bytes 2 and 3).
DATA hibitShuf<>+0(SB)/8, $0x0000000000000000
DATA hibitShuf<>+8(SB)/8, $0x0101010101010101
DATA hibitShuf<>+16(SB)/8, $0x0202020202020202
DATA hibitShuf<>+24(SB)/8, $0x0303030303030303
GLOBL hibitShuf<>(SB), RODATA|NOPTR, $32
