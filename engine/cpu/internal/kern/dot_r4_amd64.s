//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// Four-weight-row matvec kernels (decode) of the 32-value block types
// against Q8_0: dotR4<T>AVX2(n, w, wstride, a, out) writes to out[j] the dot
// product of the weight row at w + j·wstride with the activation row a, for
// j = 0..3. Each activation block is loaded and its scale converted once for
// the four rows, and the four rows' accumulator chains run side by side
// (the single-row kernel waits on one fma chain). Every row gets exactly the
// float32 operations of the single-row kernel dot<T>AVX2 (dot_q32_amd64.s),
// in the same order: lanes from VPSIGNB/VPMADDUBSW/VPMADDWD, then
// acc = fma(d_w·d_a, float(lanes), acc) block by block, hsum_float_8, and
// for IQ4_NL and MXFP4 the even/odd accumulators and the scalar last block.
//
// Q4_0 and Q5_0 take their weights unsigned (w + 8, w + 16) and subtract
// bias·Σa per lane, which gives the same exact int32 lanes as ggml's VPSIGNB
// form. R11 runs over the weight rows r4Lead rows (two groups of four) ahead
// and prefetches them: four interleaved row streams defeat the hardware
// prefetcher, one linear prefetch stream does not.
//
// Registers: SI weight row 0, R8 wstride, R9 3·wstride, R11 prefetch, DI
// activations, CX blocks, Y0..Y3 row accumulators (Y8..Y11 the odd-block
// ones, or the bias lanes), Y12 the activation quants of the block, X7 its
// scale, X4 d_w, Y5/Y6 weight temporaries, Y13 a per-type constant, Y14
// bytes 0x0F, Y15 int16 ones.

#define BCASTD(v, x, y) MOVL v, BX; VMOVD BX, x; VPBROADCASTD x, y


#define ARGSR4 \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ wstride+32(FP), R8    \
	LEAQ (R8)(R8*2), R9        \
	MOVQ a_base+40(FP), DI     \
	MOVQ ·r4Lead(SB), R11      \
	IMULQ R8, R11              \
	ADDQ SI, R11               \
	SHRQ $5, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3          \
	VXORPS Y8, Y8, Y8          \
	VXORPS Y9, Y9, Y9          \
	VXORPS Y10, Y10, Y10       \
	VXORPS Y11, Y11, Y11


// ---- activation block at o(DI): quants to Y12, scale in lane 0 of X7 -------
// (VCVTPH2PS reads 8 bytes at the scale: every block has them).

#define ACTX(o) VMOVDQU o+2(DI), Y12; VCVTPH2PS o(DI), X7

// ACTSS is ACTX plus Y8 = bias·(lanes of Σ a), the bias 2^shift (Y13 bytes
// 0x01): with unsigned weights u = w + bias, Σ w·a = Σ u·a − bias·Σ a exactly,
// lane by lane, which saves RROWS's two VPSIGNB per row.
#define ACTSS(o, shift) \
	ACTX(o)                    \
	VPMADDUBSW Y12, Y13, Y8    \
	VPMADDWD   Y15, Y8, Y8     \
	VPSLLD     $shift, Y8, Y8

// ---- one row's block: acc = fma(d_w·d_a, float(lanes of Σ w·a), acc) --------
// The scale product is taken in scalar (X4 = d_w, X7 = d_a) and broadcast:
// the same float32 multiplication as the single-row kernel's.

// RROWS: signed weights w in Y6 (VPSIGNB moves w's sign onto a, as ggml).
#define RROWS(acc) \
	VPSIGNB      Y6, Y6, Y5    \
	VPSIGNB      Y6, Y12, Y6   \
	VPMADDUBSW   Y6, Y5, Y6    \
	VPMADDWD     Y15, Y6, Y6   \
	VCVTDQ2PS    Y6, Y6        \
	VMULSS       X4, X7, X4    \
	VBROADCASTSS X4, Y4        \
	VFMADD231PS  Y6, Y4, acc

// UROWS: unsigned weights u = w + bias in Y6, Y8 from ACTSS.
#define UROWS(acc) \
	VPMADDUBSW   Y12, Y6, Y6   \
	VPMADDWD     Y15, Y6, Y6   \
	VPSUBD       Y8, Y6, Y6    \
	VCVTDQ2PS    Y6, Y6        \
	VMULSS       X4, X7, X4    \
	VBROADCASTSS X4, Y4        \
	VFMADD231PS  Y6, Y4, acc

// TAILR: x = fma(d_w·d_a, float(Σ w·a), x) in scalar (ggml's leftover loop).
#define TAILR(x) \
	VPSIGNB      Y6, Y6, Y5    \
	VPSIGNB      Y6, Y12, Y6   \
	VPMADDUBSW   Y6, Y5, Y6    \
	VPMADDWD     Y15, Y6, Y6   \
	VEXTRACTI128 $1, Y6, X5    \
	VPADDD       X5, X6, X6    \
	VPSHUFD      $0x4e, X6, X5 \
	VPADDD       X5, X6, X6    \
	VPSHUFD      $0xb1, X6, X5 \
	VPADDD       X5, X6, X6    \
	VCVTDQ2PS    X6, X6        \
	VMULSS       X4, X7, X4    \
	VFMADD231SS  X6, X4, x

// ---- weight preparation: X4 = d_w (lane 0), Y6 = 32 weight bytes ------------

#define WDS(d) VCVTPH2PS d, X4

// NIBV: the 32 nibbles of the 16 bytes at q in Y6 (low nibbles first): one
// load into both halves, the high half shifted by 4.
#define NIBV(q) \
	VBROADCASTI128 q, Y6                      \
	VPSRLVD        r4shift04<>(SB), Y6, Y6    \
	VPAND          Y14, Y6, Y6

#define PQ8_0(d, q) WDS(d); VMOVDQU q, Y6
#define PU4_0(d, q) WDS(d); NIBV(q)
#define PIQ4NL(d, q) WDS(d); NIBV(q); VPSHUFB Y6, Y13, Y6

// PU5_0: u = nibble | bit<<4 = w + 16; the 32 high bits at h.
#define PU5_0(d, h, q) \
	WDS(d)                               \
	NIBV(q)                              \
	VPBROADCASTD h, Y5                   \
	VPSHUFB      r4hibitShuf<>(SB), Y5, Y5 \
	VPOR         r4hibitMask<>(SB), Y5, Y5 \
	VPCMPEQB     r4allOnes<>(SB), Y5, Y5 \
	VPAND        r4bytes10<>(SB), Y5, Y5 \
	VPOR         Y5, Y6, Y6

// MXFP4: d_w = 2^(e−128) from e8m0HalfTab (R10).
#define PMX(e, q) \
	MOVBLZX      e, BX              \
	VMOVSS       (R10)(BX*4), X4    \
	NIBV(q)                         \
	VPSHUFB      Y6, Y13, Y6

// ---- loops ------------------------------------------------------------------

// func dotR4Q8_0AVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q8_0AVX2(SB), NOSPLIT, $0-88
	ARGSR4
	ONES16
	TESTQ CX, CX
	JZ    r4q80done

r4q80loop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	ADDQ $136, R11
	ACTX(0)
	PQ8_0(0(SI), 2(SI))
	RROWS(Y0)
	PQ8_0(0(SI)(R8*1), 2(SI)(R8*1))
	RROWS(Y1)
	PQ8_0(0(SI)(R8*2), 2(SI)(R8*2))
	RROWS(Y2)
	PQ8_0(0(SI)(R9*1), 2(SI)(R9*1))
	RROWS(Y3)
	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  r4q80loop

r4q80done:
	STORER4
	VZEROUPPER
	RET

// func dotR4Q4_0AVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q4_0AVX2(SB), NOSPLIT, $0-88
	ARGSR4
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x01010101, X13, Y13)
	TESTQ CX, CX
	JZ    r4q40done

r4q40loop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	ADDQ $72, R11
	ACTSS(0, 3)
	PU4_0(0(SI), 2(SI))
	UROWS(Y0)
	PU4_0(0(SI)(R8*1), 2(SI)(R8*1))
	UROWS(Y1)
	PU4_0(0(SI)(R8*2), 2(SI)(R8*2))
	UROWS(Y2)
	PU4_0(0(SI)(R9*1), 2(SI)(R9*1))
	UROWS(Y3)
	ADDQ $18, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  r4q40loop

r4q40done:
	STORER4
	VZEROUPPER
	RET

// func dotR4Q5_0AVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q5_0AVX2(SB), NOSPLIT, $0-88
	ARGSR4
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x01010101, X13, Y13)
	TESTQ CX, CX
	JZ    r4q50done

r4q50loop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	ADDQ $88, R11
	ACTSS(0, 4)
	PU5_0(0(SI), 2(SI), 6(SI))
	UROWS(Y0)
	PU5_0(0(SI)(R8*1), 2(SI)(R8*1), 6(SI)(R8*1))
	UROWS(Y1)
	PU5_0(0(SI)(R8*2), 2(SI)(R8*2), 6(SI)(R8*2))
	UROWS(Y2)
	PU5_0(0(SI)(R9*1), 2(SI)(R9*1), 6(SI)(R9*1))
	UROWS(Y3)
	ADDQ $22, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  r4q50loop

r4q50done:
	STORER4
	VZEROUPPER
	RET

// IQ4NLPAIR runs one block pair (even block into Y0..Y3, odd into Y8..Y11)
// through the four rows.
#define IQ4NLPAIR \
	ACTX(0)                                            \
	PIQ4NL(0(SI), 2(SI))                              \
	RROWS(Y0)                                          \
	PIQ4NL(0(SI)(R8*1), 2(SI)(R8*1))                  \
	RROWS(Y1)                                          \
	PIQ4NL(0(SI)(R8*2), 2(SI)(R8*2))                  \
	RROWS(Y2)                                          \
	PIQ4NL(0(SI)(R9*1), 2(SI)(R9*1))                  \
	RROWS(Y3)                                          \
	ACTX(34)                                           \
	PIQ4NL(18(SI), 20(SI))                            \
	RROWS(Y8)                                          \
	PIQ4NL(18(SI)(R8*1), 20(SI)(R8*1))                \
	RROWS(Y9)                                          \
	PIQ4NL(18(SI)(R8*2), 20(SI)(R8*2))                \
	RROWS(Y10)                                         \
	PIQ4NL(18(SI)(R9*1), 20(SI)(R9*1))                \
	RROWS(Y11)

// FOLD4 adds the odd accumulators into the even ones, as the single-row
// kernel does before hsum_float_8, and reduces each row into X0..X3.
#define FOLD4 \
	VADDPS Y8, Y0, Y0          \
	VADDPS Y9, Y1, Y1          \
	VADDPS Y10, Y2, Y2         \
	VADDPS Y11, Y3, Y3         \
	HSUMX(Y0, X0, X12)         \
	HSUMX(Y1, X1, X12)         \
	HSUMX(Y2, X2, X12)         \
	HSUMX(Y3, X3, X12)

#define STOREX4 \
	MOVQ   out_base+64(FP), AX \
	VMOVSS X0, (AX)            \
	VMOVSS X1, 4(AX)           \
	VMOVSS X2, 8(AX)           \
	VMOVSS X3, 12(AX)

// func dotR4IQ4_NLAVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4IQ4_NLAVX2(SB), NOSPLIT, $0-88
	ARGSR4
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y13

r4iq4nlloop:
	CMPQ CX, $2
	JB   r4iq4nltail
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	ADDQ $144, R11
	IQ4NLPAIR
	ADDQ $36, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  r4iq4nlloop

r4iq4nltail:
	FOLD4
	TESTQ CX, CX
	JZ    r4iq4nldone
	ACTX(0)
	PIQ4NL(0(SI), 2(SI))
	TAILR(X0)
	PIQ4NL(0(SI)(R8*1), 2(SI)(R8*1))
	TAILR(X1)
	PIQ4NL(0(SI)(R8*2), 2(SI)(R8*2))
	TAILR(X2)
	PIQ4NL(0(SI)(R9*1), 2(SI)(R9*1))
	TAILR(X3)

r4iq4nldone:
	STOREX4
	VZEROUPPER
	RET

// func dotR4MXFP4AVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4MXFP4AVX2(SB), NOSPLIT, $0-88
	ARGSR4
	ONES16
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesMXFP4(SB), Y13
	LEAQ ·e8m0HalfTab(SB), R10

r4mxloop:
	CMPQ CX, $2
	JB   r4mxtail
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	ADDQ $136, R11
	ACTX(0)
	PMX(0(SI), 1(SI))
	RROWS(Y0)
	PMX(0(SI)(R8*1), 1(SI)(R8*1))
	RROWS(Y1)
	PMX(0(SI)(R8*2), 1(SI)(R8*2))
	RROWS(Y2)
	PMX(0(SI)(R9*1), 1(SI)(R9*1))
	RROWS(Y3)
	ACTX(34)
	PMX(17(SI), 18(SI))
	RROWS(Y8)
	PMX(17(SI)(R8*1), 18(SI)(R8*1))
	RROWS(Y9)
	PMX(17(SI)(R8*2), 18(SI)(R8*2))
	RROWS(Y10)
	PMX(17(SI)(R9*1), 18(SI)(R9*1))
	RROWS(Y11)
	ADDQ $34, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  r4mxloop

r4mxtail:
	FOLD4
	TESTQ CX, CX
	JZ    r4mxdone
	ACTX(0)
	PMX(0(SI), 1(SI))
	TAILR(X0)
	PMX(0(SI)(R8*1), 1(SI)(R8*1))
	TAILR(X1)
	PMX(0(SI)(R8*2), 1(SI)(R8*2))
	TAILR(X2)
	PMX(0(SI)(R9*1), 1(SI)(R9*1))
	TAILR(X3)

r4mxdone:
	STOREX4
	VZEROUPPER
	RET

DATA r4hibitShuf<>+0(SB)/8, $0x0000000000000000
DATA r4hibitShuf<>+8(SB)/8, $0x0101010101010101
DATA r4hibitShuf<>+16(SB)/8, $0x0202020202020202
DATA r4hibitShuf<>+24(SB)/8, $0x0303030303030303
GLOBL r4hibitShuf<>(SB), RODATA|NOPTR, $32
DATA r4hibitMask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA r4hibitMask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA r4hibitMask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA r4hibitMask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL r4hibitMask<>(SB), RODATA|NOPTR, $32
DATA r4allOnes<>+0(SB)/8, $-1
DATA r4allOnes<>+8(SB)/8, $-1
DATA r4allOnes<>+16(SB)/8, $-1
DATA r4allOnes<>+24(SB)/8, $-1
GLOBL r4allOnes<>(SB), RODATA|NOPTR, $32
DATA r4bytes10<>+0(SB)/8, $0x1010101010101010
DATA r4bytes10<>+8(SB)/8, $0x1010101010101010
DATA r4bytes10<>+16(SB)/8, $0x1010101010101010
DATA r4bytes10<>+24(SB)/8, $0x1010101010101010
GLOBL r4bytes10<>(SB), RODATA|NOPTR, $32
DATA r4shift04<>+0(SB)/8, $0
DATA r4shift04<>+8(SB)/8, $0
DATA r4shift04<>+16(SB)/8, $0x0000000400000004
DATA r4shift04<>+24(SB)/8, $0x0000000400000004
GLOBL r4shift04<>(SB), RODATA|NOPTR, $32
