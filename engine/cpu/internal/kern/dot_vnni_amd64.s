//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// AVX-512 VNNI kernels (instruction set "avx512vnni": AVX-512 F/BW/VL with
// VNNI, plus AVX2/FMA/F16C) of the 32-value block types against Q8_0. They
// are the AVX2 four-weight-row matvec kernels (dot_r4_amd64.s) and
// eight-activation-row matmul kernels (dot_t8_amd64.s) with the integer
// block sums taken by VPDPBUSD on 256-bit registers (EVEX, AVX512VL):
// VPDPBUSD's int32 lane k holds the four products 4k..4k+3, the same exact
// lanes as VPMADDUBSW + VPMADDWD(ones), so every row still gets exactly the
// float32 operations of the single-row kernel dot<T>AVX2 in the same order
// (ggml's AVX2 vec_dot order). The float part stays eight lanes per row: the
// per-row fma chain is what fixes the order, so 512-bit registers would need
// a shuffle per fma and buy nothing here.
//
//   - matvec (dotR4<T>VNNI): unsigned weights u = w + c (Q8_0 and IQ4_NL
//     c = 128 by an XOR or a shifted codebook, Q4_0 c = 8, Q5_0 c = 16) and
//     per block the lanes of c·Σa (one VPDPBUSD with bytes c, shared by the
//     four rows), Σ w·a = Σ u·a − c·Σa; the four rows' scale products formed
//     by one VCVTPH2PS and one VMULPS and read back by the FMA's embedded
//     broadcast.
//   - matmul (dotT8<T>VNNI): VPSIGNB moves w's sign onto a as in AVX2, then
//     VPDPBUSD(|w|, a·sign w) replaces VPMADDUBSW + VPMADDWD, and the FMA
//     broadcasts the scale product from memory.

#define BCASTD(v, x, y) MOVL v, AX; VMOVD AX, x; VPBROADCASTD x, y


// ---- matvec: four weight rows ---------------------------------------------
// Registers: SI weight row 0, R8 wstride, R9 3·wstride, R11 prefetch, DI
// activations, CX blocks, Y0..Y3 row accumulators (Y4 Y9 Y10 Y11 the
// odd-block ones of IQ4_NL), Y12 activation quants, Y8 lanes of c·Σa, Y13
// bytes c, Y14 bytes 0x0F, Y15 IQ4_NL's shifted codebook, Y5/Y6/Y7
// temporaries, scale products at 0(SP).

#define ARGSV4 \
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
	VXORPS Y3, Y3, Y3

#define STOREV4 \
	MOVQ   out_base+64(FP), AX \
	HSUMX(Y0, X0, X12)         \
	VMOVSS X0, (AX)            \
	HSUMX(Y1, X1, X12)         \
	VMOVSS X1, 4(AX)           \
	HSUMX(Y2, X2, X12)         \
	VMOVSS X2, 8(AX)           \
	HSUMX(Y3, X3, X12)         \
	VMOVSS X3, 12(AX)

// SC4(wo, ao): the four rows' d_w (fp16 at wo of each row) times d_a (fp16
// at ao(DI)) to 0(SP) as four float32 (the single-row kernel's products).
#define SC4(wo, ao) \
	MOVWLZX      wo(SI), AX          \
	MOVWLZX      wo(SI)(R8*1), BX    \
	SHLL         $16, BX             \
	ORL          BX, AX              \
	MOVWLZX      wo(SI)(R8*2), BX    \
	MOVWLZX      wo(SI)(R9*1), DX    \
	SHLL         $16, DX             \
	ORL          DX, BX              \
	SHLQ         $32, BX             \
	ORQ          BX, AX              \
	VMOVQ        AX, X5              \
	VCVTPH2PS    X5, X5              \
	VCVTPH2PS    ao(DI), X7          \
	VBROADCASTSS X7, X7              \
	VMULPS       X7, X5, X5          \
	VMOVUPS      X5, 0(SP)

// ACTV(o): Y12 = the activation quants at o+2(DI), Y8 = lanes of c·Σa.
#define ACTV(o) \
	VMOVDQU  o+2(DI), Y12      \
	VPXOR    Y8, Y8, Y8        \
	VPDPBUSD Y12, Y13, Y8

// UROWV: acc = fma(d_w·d_a, float(lanes of Σ u·a − c·Σa), acc), u in Y6,
// the scale product at r(SP).
#define UROWV(r, acc) \
	VPXOR            Y5, Y5, Y5  \
	VPDPBUSD         Y12, Y6, Y5 \
	VPSUBD           Y8, Y5, Y5  \
	VCVTDQ2PS        Y5, Y5      \
	VFMADD231PS.BCST r(SP), Y5, acc

// NIBV: the 32 nibbles of the 16 bytes at q in Y6 (low nibbles first).
#define NIBV(q) \
	VBROADCASTI128 q, Y6                      \
	VPSRLVD        vnshift04<>(SB), Y6, Y6    \
	VPAND          Y14, Y6, Y6

#define UQ8_0(q) VPXOR q, Y13, Y6
#define UQ4_0(q) NIBV(q)
#define UIQ4NL(q) NIBV(q); VPSHUFB Y6, Y15, Y6

// UQ5_0: u = nibble | bit<<4 (= w + 16), the 32 high bits at h.
#define UQ5_0(h, q) \
	NIBV(q)                              \
	VPBROADCASTD h, Y5                   \
	VPSHUFB      vnhibitShuf<>(SB), Y5, Y5 \
	VPOR         vnhibitMask<>(SB), Y5, Y5 \
	VPCMPEQB     vnallOnes<>(SB), Y5, Y5 \
	VPAND        vnbytes10<>(SB), Y5, Y5 \
	VPOR         Y5, Y6, Y6

// TAILV: x = fma(d_w·d_a, float(Σ u·a − c·Σa), x) in scalar (ggml's
// leftover loop for an odd last block), the product at r(SP).
#define TAILV(r, x) \
	VPXOR        Y5, Y5, Y5    \
	VPDPBUSD     Y12, Y6, Y5   \
	VPSUBD       Y8, Y5, Y5    \
	VEXTRACTI128 $1, Y5, X6    \
	VPADDD       X6, X5, X5    \
	VPSHUFD      $0x4e, X5, X6 \
	VPADDD       X6, X5, X5    \
	VPSHUFD      $0xb1, X5, X6 \
	VPADDD       X6, X5, X5    \
	VCVTDQ2PS    X5, X5        \
	VMOVSS       r(SP), X6     \
	VFMADD231SS  X5, X6, x

// ---- matmul: eight activation rows ---------------------------------------
// Registers as dotT8<T>AVX2: SI weights, DI activations of row 0, R8
// stride, R9 3·stride, R10 5·stride, R11 7·stride, BX scales, CX blocks,
// accumulators Y0 Y1 Y2 Y3 Y7 Y8 Y9 Y10, scale products at 0(SP), Y6 w,
// Y5 |w|, Y12/Y13 temporaries, Y14 bytes 0x0F (Y4 after the scales, Y11 and Y15 free).




// T8ROWV: acc += (d_w·d_a of row r) · float(lanes of Σ w·a), row r's quants at q.
#define T8ROWV(q, r, acc) \
	VMOVDQU          q, Y12        \
	VPSIGNB          Y6, Y12, Y12  \
	VPXOR            Y13, Y13, Y13 \
	VPDPBUSD         Y12, Y5, Y13  \
	VCVTDQ2PS        Y13, Y13      \
	VFMADD231PS.BCST r*4(SP), Y13, acc

#define T8ROWSV \
	VPSIGNB Y6, Y6, Y5                   \
	T8ROWV(2(DI), 0, Y0)                 \
	T8ROWV(2(DI)(R8*1), 1, Y1)           \
	T8ROWV(2(DI)(R8*2), 2, Y2)           \
	T8ROWV(2(DI)(R9*1), 3, Y3)           \
	T8ROWV(2(DI)(R8*4), 4, Y7)           \
	T8ROWV(2(DI)(R10*1), 5, Y8)          \
	T8ROWV(2(DI)(R9*2), 6, Y9)           \
	T8ROWV(2(DI)(R11*1), 7, Y10)

#define NIB32(q) \
	VMOVDQU     q, X6          \
	VPSRLW      $4, X6, X5     \
	VINSERTI128 $1, X5, Y6, Y6 \
	VPAND       Y14, Y6, Y6

#define HIBITS5(h) \
	VPBROADCASTD h, Y5                      \
	VPSHUFB      vnhibitShuf<>(SB), Y5, Y5  \
	VPOR         vnhibitMask<>(SB), Y5, Y5  \
	VPCMPEQB     vnallOnes<>(SB), Y5, Y5    \
	VPANDN       vnbytesF0<>(SB), Y5, Y5    \
	VPOR         Y5, Y6, Y6

// ---- functions ----------------------------------------------------------------

// func dotR4Q8_0VNNI(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q8_0VNNI(SB), NOSPLIT, $16-88
	ARGSV4
	BCASTD($0x80808080, X13, Y13)
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    v4q80done

v4q80loop:
	PREFETCHT0 0(R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	ADDQ $(136), R11
	ACTV(0)
	SC4(0, 0)
	UQ8_0(2(SI))
	UROWV(0, Y0)
	UQ8_0(2(SI)(R8*1))
	UROWV(4, Y1)
	UQ8_0(2(SI)(R8*2))
	UROWV(8, Y2)
	UQ8_0(2(SI)(R9*1))
	UROWV(12, Y3)
	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  v4q80loop

v4q80done:
	STOREV4
	VZEROUPPER
	RET

// func dotR4Q4_0VNNI(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q4_0VNNI(SB), NOSPLIT, $16-88
	ARGSV4
	BCASTD($0x08080808, X13, Y13)
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    v4q40done

v4q40loop:
	PREFETCHT0 0(R11)
	PREFETCHT0 64(R11)
	ADDQ $(72), R11
	ACTV(0)
	SC4(0, 0)
	UQ4_0(2(SI))
	UROWV(0, Y0)
	UQ4_0(2(SI)(R8*1))
	UROWV(4, Y1)
	UQ4_0(2(SI)(R8*2))
	UROWV(8, Y2)
	UQ4_0(2(SI)(R9*1))
	UROWV(12, Y3)
	ADDQ $18, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  v4q40loop

v4q40done:
	STOREV4
	VZEROUPPER
	RET

// func dotR4Q5_0VNNI(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q5_0VNNI(SB), NOSPLIT, $16-88
	ARGSV4
	BCASTD($0x10101010, X13, Y13)
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    v4q50done

v4q50loop:
	PREFETCHT0 0(R11)
	PREFETCHT0 64(R11)
	ADDQ $(88), R11
	ACTV(0)
	SC4(0, 0)
	UQ5_0(2(SI), 6(SI))
	UROWV(0, Y0)
	UQ5_0(2(SI)(R8*1), 6(SI)(R8*1))
	UROWV(4, Y1)
	UQ5_0(2(SI)(R8*2), 6(SI)(R8*2))
	UROWV(8, Y2)
	UQ5_0(2(SI)(R9*1), 6(SI)(R9*1))
	UROWV(12, Y3)
	ADDQ $22, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  v4q50loop

v4q50done:
	STOREV4
	VZEROUPPER
	RET

// func dotR4IQ4_NLVNNI(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4IQ4_NLVNNI(SB), NOSPLIT, $16-88
	ARGSV4
	BCASTD($0x80808080, X13, Y13)
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 vnkvalues128<>(SB), Y15
	VXORPS Y4, Y4, Y4
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

v4iq4nlloop:
	CMPQ CX, $2
	JB   v4iq4nltail
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	ADDQ $144, R11
	ACTV(0)
	SC4(0, 0)
	UIQ4NL(2(SI))
	UROWV(0, Y0)
	UIQ4NL(2(SI)(R8*1))
	UROWV(4, Y1)
	UIQ4NL(2(SI)(R8*2))
	UROWV(8, Y2)
	UIQ4NL(2(SI)(R9*1))
	UROWV(12, Y3)
	ACTV(34)
	SC4(18, 34)
	UIQ4NL(20(SI))
	UROWV(0, Y4)
	UIQ4NL(20(SI)(R8*1))
	UROWV(4, Y9)
	UIQ4NL(20(SI)(R8*2))
	UROWV(8, Y10)
	UIQ4NL(20(SI)(R9*1))
	UROWV(12, Y11)
	ADDQ $36, SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  v4iq4nlloop

v4iq4nltail:
	VADDPS Y4, Y0, Y0
	VADDPS Y9, Y1, Y1
	VADDPS Y10, Y2, Y2
	VADDPS Y11, Y3, Y3
	HSUMX(Y0, X0, X12)
	HSUMX(Y1, X1, X12)
	HSUMX(Y2, X2, X12)
	HSUMX(Y3, X3, X12)
	TESTQ CX, CX
	JZ    v4iq4nldone
	ACTV(0)
	SC4(0, 0)
	UIQ4NL(2(SI))
	TAILV(0, X0)
	UIQ4NL(2(SI)(R8*1))
	TAILV(4, X1)
	UIQ4NL(2(SI)(R8*2))
	TAILV(8, X2)
	UIQ4NL(2(SI)(R9*1))
	TAILV(12, X3)

v4iq4nldone:
	MOVQ   out_base+64(FP), AX
	VMOVSS X0, (AX)
	VMOVSS X1, 4(AX)
	VMOVSS X2, 8(AX)
	VMOVSS X3, 12(AX)
	VZEROUPPER
	RET

// func dotT8Q8_0VNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)
TEXT ·dotT8Q8_0VNNI(SB), NOSPLIT, $32-120
	ARGST8
	TESTQ CX, CX
	JZ    vt8q80done

vt8q80loop:
	SCALES(0(SI))
	VMOVDQU 2(SI), Y6
	T8ROWSV
	ADDQ $34, SI
	ADDQ $34, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  vt8q80loop

vt8q80done:
	STORET8
	VZEROUPPER
	RET

// func dotT8Q4_0VNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)
TEXT ·dotT8Q4_0VNNI(SB), NOSPLIT, $32-120
	ARGST8
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    vt8q40done

vt8q40loop:
	SCALES(0(SI))
	NIB32(2(SI))
	VPSUBB vnbytes08<>(SB), Y6, Y6
	T8ROWSV
	ADDQ $18, SI
	ADDQ $34, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  vt8q40loop

vt8q40done:
	STORET8
	VZEROUPPER
	RET

// func dotT8Q5_0VNNI(n int, w, a []byte, stride int, sc []float32, out []float32, ostride int)
TEXT ·dotT8Q5_0VNNI(SB), NOSPLIT, $32-120
	ARGST8
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    vt8q50done

vt8q50loop:
	SCALES(0(SI))
	NIB32(6(SI))
	HIBITS5(2(SI))
	T8ROWSV
	ADDQ $22, SI
	ADDQ $34, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  vt8q50loop

vt8q50done:
	STORET8
	VZEROUPPER
	RET

DATA vnhibitShuf<>+0(SB)/8, $0x0000000000000000
DATA vnhibitShuf<>+8(SB)/8, $0x0101010101010101
DATA vnhibitShuf<>+16(SB)/8, $0x0202020202020202
DATA vnhibitShuf<>+24(SB)/8, $0x0303030303030303
GLOBL vnhibitShuf<>(SB), RODATA|NOPTR, $32

DATA vnhibitMask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA vnhibitMask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA vnhibitMask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA vnhibitMask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL vnhibitMask<>(SB), RODATA|NOPTR, $32

DATA vnallOnes<>+0(SB)/8, $-1
DATA vnallOnes<>+8(SB)/8, $-1
DATA vnallOnes<>+16(SB)/8, $-1
DATA vnallOnes<>+24(SB)/8, $-1
GLOBL vnallOnes<>(SB), RODATA|NOPTR, $32

DATA vnbytes10<>+0(SB)/8, $0x1010101010101010
DATA vnbytes10<>+8(SB)/8, $0x1010101010101010
DATA vnbytes10<>+16(SB)/8, $0x1010101010101010
DATA vnbytes10<>+24(SB)/8, $0x1010101010101010
GLOBL vnbytes10<>(SB), RODATA|NOPTR, $32

DATA vnbytes08<>+0(SB)/8, $0x0808080808080808
DATA vnbytes08<>+8(SB)/8, $0x0808080808080808
DATA vnbytes08<>+16(SB)/8, $0x0808080808080808
DATA vnbytes08<>+24(SB)/8, $0x0808080808080808
GLOBL vnbytes08<>(SB), RODATA|NOPTR, $32

DATA vnbytesF0<>+0(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA vnbytesF0<>+8(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA vnbytesF0<>+16(SB)/8, $0xf0f0f0f0f0f0f0f0
DATA vnbytesF0<>+24(SB)/8, $0xf0f0f0f0f0f0f0f0
GLOBL vnbytesF0<>(SB), RODATA|NOPTR, $32

DATA vnshift04<>+0(SB)/8, $0
DATA vnshift04<>+8(SB)/8, $0
DATA vnshift04<>+16(SB)/8, $0x0000000400000004
DATA vnshift04<>+24(SB)/8, $0x0000000400000004
GLOBL vnshift04<>(SB), RODATA|NOPTR, $32

DATA vnkvalues128<>+0(SB)/8, $0x766a5d4f3f2d1801
DATA vnkvalues128<>+8(SB)/8, $0xf1d9c5b5a6998d81
GLOBL vnkvalues128<>(SB), RODATA|NOPTR, $16
