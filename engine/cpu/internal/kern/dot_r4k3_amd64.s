//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// Four-weight-row matvec kernels (decode) of IQ4_XS and Q3_K against Q8_K,
// dotR4<T>AVX2(n, w, wstride, a, out): out[j] = the dot product of the
// weight row at w + j·wstride with a, j = 0..3. Each row gets exactly the
// float32 operations of the single-row kernel (dot_k_amd64.s); the exact
// integer sums are formed with fewer instructions:
//
//   - IQ4_XS: the eight 6-bit sub-block scales decoded in vector registers
//     (per-lane shifts) instead of 80 scalar instructions, each as an int16
//     pair broadcast from the stack by one load;
//   - Q3_K: the sixteen scales decoded in vector registers, each group's
//     scale pair by VPSHUFB + VPMOVSXBW from a register, and the weights
//     taken unsigned, q = w + 4 (0..7), minus the 4·a int16 pairs of the
//     activation computed once for the four rows (ggml's own form), which
//     gives the int16 pairs of w·a the single-row kernel forms by VPSIGNB.
//
// Registers: SI weight row 0, R8 wstride, R9 3·wstride, DX the current row,
// DI activations, CX super-blocks, R13 prefetch (r4Lead rows ahead,
// linear), Y0..Y3 row accumulators. Every macro precedes the first TEXT.

#define BCASTD(v, x, y) MOVL v, BX; VMOVD BX, x; VPBROADCASTD x, y


#define K3ARGS \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ wstride+32(FP), R8    \
	LEAQ (R8)(R8*2), R9        \
	MOVQ a_base+40(FP), DI     \
	MOVQ ·r4Lead(SB), R13      \
	IMULQ R8, R13              \
	ADDQ SI, R13               \
	SHRQ $8, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3

#define K3STORE \
	MOVQ   out_base+64(FP), AX \
	HSUMX(Y0, X0, X12)         \
	VMOVSS X0, (AX)            \
	HSUMX(Y1, X1, X12)         \
	VMOVSS X1, 4(AX)           \
	HSUMX(Y2, X2, X12)         \
	VMOVSS X2, 8(AX)           \
	HSUMX(Y3, X3, X12)         \
	VMOVSS X3, 12(AX)

// KDF(woff, sum, acc): acc = fma(d_w·d_a, float(sum), acc), d_w the fp16 at
// woff(DX), d_a the float32 at 0(DI) (the single-row kernels' Q6DFMA).
#define KDF(woff, sum, acc) \
	VPBROADCASTW woff(DX), X12  \
	VCVTPH2PS    X12, Y12       \
	VCVTDQ2PS    sum, sum       \
	VBROADCASTSS (DI), Y13      \
	VMULPS       Y12, Y13, Y13  \
	VFMADD231PS  sum, Y13, acc

// ---- IQ4_XS ------------------------------------------------------------------
// XSSC: the eight scales ls − 32 of the row at DX, each as an int16 pair in a
// dword, to 0(SP).
#define XSSC \
	VPBROADCASTD 4(DX), Y9                 \
	VPSRLVD      k3xsShL<>(SB), Y9, Y9     \
	VPAND        k3dw0F<>(SB), Y9, Y9      \
	VPBROADCASTD 2(DX), Y10                \
	VPSRLVD      k3xsShH<>(SB), Y10, Y10   \
	VPAND        k3dw03<>(SB), Y10, Y10    \
	VPSLLD       $4, Y10, Y10              \
	VPOR         Y10, Y9, Y9               \
	VPSUBD       k3dw20<>(SB), Y9, Y9      \
	VPSLLD       $16, Y9, Y10              \
	VPAND        k3dwFFFF<>(SB), Y9, Y9    \
	VPOR         Y10, Y9, Y9               \
	VMOVDQU      Y9, 0(SP)

// XSG(ib): sub-block ib: codebook values (Y4), |values| (Y5), its scale (Y12),
// sum += madd(scale, maddubs(|w|, a·sign w)).
#define XSG(qo, so, ao, sum) \
	VBROADCASTI128 qo(DX), Y4              \
	VPSRLVD        k3shift04<>(SB), Y4, Y4 \
	VPAND          Y14, Y4, Y4             \
	VPSHUFB        Y4, Y7, Y4              \
	VPSIGNB        Y4, Y4, Y5              \
	VPBROADCASTD   so(SP), Y12             \
	VMOVDQU        ao(DI), Y13             \
	VPSIGNB        Y4, Y13, Y13            \
	VPMADDUBSW     Y13, Y5, Y13            \
	VPMADDWD       Y12, Y13, Y13           \
	VPADDD         Y13, sum, sum

// XSROW: one IQ4_XS super-block of the row at DX into acc.
#define XSROW(acc) \
	XSSC \
	VPXOR Y8, Y8, Y8 \
	XSG(8, 0, 4, Y8) \
	XSG(24, 4, 36, Y8) \
	XSG(40, 8, 68, Y8) \
	XSG(56, 12, 100, Y8) \
	XSG(72, 16, 132, Y8) \
	XSG(88, 20, 164, Y8) \
	XSG(104, 24, 196, Y8) \
	XSG(120, 28, 228, Y8) \
	KDF(0, Y8, acc)

// ---- Q3_K --------------------------------------------------------------------
// Q3SC: the sixteen scales − 32 of the row at DX as int8 in X7 (the
// single-row kernel's Q3SCALES bytes).
#define Q3SC \
	VMOVQ    96(DX), X9                  \
	VPINSRD  $2, 104(DX), X9, X9         \
	VPSHUFD  $0x44, X9, X10              \
	VPSRLVD  k3q3ShA<>(SB), X10, X10     \
	VPAND    k3b0F<>(SB), X10, X10       \
	VPSHUFD  $0xaa, X9, X11              \
	VPSRLVD  k3q3ShB<>(SB), X11, X11     \
	VPAND    X15, X11, X11               \
	VPSLLD   $4, X11, X11                \
	VPOR     X11, X10, X10               \
	VPSUBB   k3b20<>(SB), X10, X7

// Q3A: the 4·a int16 pairs of the eight 32-value groups to 0(SP).
#define Q3A \
	VPMADDUBSW 4(DI), Y14, Y8 \
	VMOVDQU    Y8, 0(SP) \
	VPMADDUBSW 36(DI), Y14, Y8 \
	VMOVDQU    Y8, 32(SP) \
	VPMADDUBSW 68(DI), Y14, Y8 \
	VMOVDQU    Y8, 64(SP) \
	VPMADDUBSW 100(DI), Y14, Y8 \
	VMOVDQU    Y8, 96(SP) \
	VPMADDUBSW 132(DI), Y14, Y8 \
	VMOVDQU    Y8, 128(SP) \
	VPMADDUBSW 164(DI), Y14, Y8 \
	VMOVDQU    Y8, 160(SP) \
	VPMADDUBSW 196(DI), Y14, Y8 \
	VMOVDQU    Y8, 192(SP) \
	VPMADDUBSW 228(DI), Y14, Y8 \
	VMOVDQU    Y8, 224(SP)

// Q3ROW: one Q3_K super-block of the row at DX into acc (Y15 bytes 0x03,
// Y14 bytes 0x04, Y6 hmask, Y4 quants, Y5 the int32 lanes).
#define Q3ROW(acc) \
	Q3SC \
	VMOVDQU    0(DX), Y6 \
	VMOVDQU    32(DX), Y4 \
	VPAND      Y15, Y4, Y8 \
	VPSLLW     $2, Y6, Y9 \
	VPAND      Y14, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    k3q6shuf<>+0(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 4(DI), Y8, Y8 \
	VPSUBW     0(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VMOVDQA    Y8, Y5 \
	VPSRLW     $2, Y4, Y8 \
	VPAND      Y15, Y8, Y8 \
	VPSLLW     $1, Y6, Y9 \
	VPAND      Y14, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    k3q6shuf<>+16(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 36(DI), Y8, Y8 \
	VPSUBW     32(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y5, Y5 \
	VPSRLW     $4, Y4, Y8 \
	VPAND      Y15, Y8, Y8 \
	VPAND      Y14, Y6, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    k3q6shuf<>+32(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 68(DI), Y8, Y8 \
	VPSUBW     64(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y5, Y5 \
	VPSRLW     $6, Y4, Y8 \
	VPAND      Y15, Y8, Y8 \
	VPSRLW     $1, Y6, Y9 \
	VPAND      Y14, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    k3q6shuf<>+48(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 100(DI), Y8, Y8 \
	VPSUBW     96(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y5, Y5 \
	VMOVDQU    64(DX), Y4 \
	VPAND      Y15, Y4, Y8 \
	VPSRLW     $2, Y6, Y9 \
	VPAND      Y14, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    k3q6shuf<>+64(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 132(DI), Y8, Y8 \
	VPSUBW     128(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y5, Y5 \
	VPSRLW     $2, Y4, Y8 \
	VPAND      Y15, Y8, Y8 \
	VPSRLW     $3, Y6, Y9 \
	VPAND      Y14, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    k3q6shuf<>+80(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 164(DI), Y8, Y8 \
	VPSUBW     160(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y5, Y5 \
	VPSRLW     $4, Y4, Y8 \
	VPAND      Y15, Y8, Y8 \
	VPSRLW     $4, Y6, Y9 \
	VPAND      Y14, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    k3q6shuf<>+96(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 196(DI), Y8, Y8 \
	VPSUBW     192(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y5, Y5 \
	VPSRLW     $6, Y4, Y8 \
	VPAND      Y15, Y8, Y8 \
	VPSRLW     $5, Y6, Y9 \
	VPAND      Y14, Y9, Y9 \
	VPOR       Y9, Y8, Y8 \
	VPSHUFB    k3q6shuf<>+112(SB), X7, X9 \
	VPMOVSXBW  X9, Y9 \
	VPMADDUBSW 228(DI), Y8, Y8 \
	VPSUBW     224(SP), Y8, Y8 \
	VPMADDWD   Y9, Y8, Y8 \
	VPADDD     Y8, Y5, Y5 \
	KDF(108, Y5, acc)

// func dotR4IQ4_XSAVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4IQ4_XSAVX2(SB), NOSPLIT, $32-88
	K3ARGS
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y7
	TESTQ CX, CX
	JZ    k3iq4xsdone

k3iq4xsloop:
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ $(544), R13
	MOVQ SI, DX
	XSROW(Y0)
	LEAQ (SI)(R8*1), DX
	XSROW(Y1)
	LEAQ (SI)(R8*2), DX
	XSROW(Y2)
	LEAQ (SI)(R9*1), DX
	XSROW(Y3)
	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  k3iq4xsloop

k3iq4xsdone:
	K3STORE
	VZEROUPPER
	RET

// func dotR4Q3_KAVX2(n int, w []byte, wstride int, a []byte, out []float32)
TEXT ·dotR4Q3_KAVX2(SB), NOSPLIT, $256-88
	K3ARGS
	BCASTD($0x03030303, X15, Y15)
	BCASTD($0x04040404, X14, Y14)
	TESTQ CX, CX
	JZ    k3q3kdone

k3q3kloop:
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	ADDQ $(440), R13
	Q3A
	MOVQ SI, DX
	Q3ROW(Y0)
	LEAQ (SI)(R8*1), DX
	Q3ROW(Y1)
	LEAQ (SI)(R8*2), DX
	Q3ROW(Y2)
	LEAQ (SI)(R9*1), DX
	Q3ROW(Y3)
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  k3q3kloop

k3q3kdone:
	K3STORE
	VZEROUPPER
	RET

DATA k3xsShL<>+0(SB)/8, $0x400000000
DATA k3xsShL<>+8(SB)/8, $0xc00000008
DATA k3xsShL<>+16(SB)/8, $0x1400000010
DATA k3xsShL<>+24(SB)/8, $0x1c00000018
GLOBL k3xsShL<>(SB), RODATA|NOPTR, $32

DATA k3xsShH<>+0(SB)/8, $0x200000000
DATA k3xsShH<>+8(SB)/8, $0x600000004
DATA k3xsShH<>+16(SB)/8, $0xa00000008
DATA k3xsShH<>+24(SB)/8, $0xe0000000c
GLOBL k3xsShH<>(SB), RODATA|NOPTR, $32

DATA k3dw0F<>+0(SB)/8, $0xf0000000f
DATA k3dw0F<>+8(SB)/8, $0xf0000000f
DATA k3dw0F<>+16(SB)/8, $0xf0000000f
DATA k3dw0F<>+24(SB)/8, $0xf0000000f
GLOBL k3dw0F<>(SB), RODATA|NOPTR, $32

DATA k3dw03<>+0(SB)/8, $0x300000003
DATA k3dw03<>+8(SB)/8, $0x300000003
DATA k3dw03<>+16(SB)/8, $0x300000003
DATA k3dw03<>+24(SB)/8, $0x300000003
GLOBL k3dw03<>(SB), RODATA|NOPTR, $32

DATA k3dw20<>+0(SB)/8, $0x2000000020
DATA k3dw20<>+8(SB)/8, $0x2000000020
DATA k3dw20<>+16(SB)/8, $0x2000000020
DATA k3dw20<>+24(SB)/8, $0x2000000020
GLOBL k3dw20<>(SB), RODATA|NOPTR, $32

DATA k3dwFFFF<>+0(SB)/8, $0xffff0000ffff
DATA k3dwFFFF<>+8(SB)/8, $0xffff0000ffff
DATA k3dwFFFF<>+16(SB)/8, $0xffff0000ffff
DATA k3dwFFFF<>+24(SB)/8, $0xffff0000ffff
GLOBL k3dwFFFF<>(SB), RODATA|NOPTR, $32

DATA k3shift04<>+0(SB)/8, $0x0
DATA k3shift04<>+8(SB)/8, $0x0
DATA k3shift04<>+16(SB)/8, $0x400000004
DATA k3shift04<>+24(SB)/8, $0x400000004
GLOBL k3shift04<>(SB), RODATA|NOPTR, $32

DATA k3q3ShA<>+0(SB)/8, $0x0
DATA k3q3ShA<>+8(SB)/8, $0x400000004
GLOBL k3q3ShA<>(SB), RODATA|NOPTR, $16

DATA k3q3ShB<>+0(SB)/8, $0x200000000
DATA k3q3ShB<>+8(SB)/8, $0x600000004
GLOBL k3q3ShB<>(SB), RODATA|NOPTR, $16

DATA k3b0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA k3b0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL k3b0F<>(SB), RODATA|NOPTR, $16

DATA k3b20<>+0(SB)/8, $0x2020202020202020
DATA k3b20<>+8(SB)/8, $0x2020202020202020
GLOBL k3b20<>(SB), RODATA|NOPTR, $16

DATA k3q6shuf<>+0(SB)/8, $0x0
DATA k3q6shuf<>+8(SB)/8, $0x101010101010101
DATA k3q6shuf<>+16(SB)/8, $0x202020202020202
DATA k3q6shuf<>+24(SB)/8, $0x303030303030303
DATA k3q6shuf<>+32(SB)/8, $0x404040404040404
DATA k3q6shuf<>+40(SB)/8, $0x505050505050505
DATA k3q6shuf<>+48(SB)/8, $0x606060606060606
DATA k3q6shuf<>+56(SB)/8, $0x707070707070707
DATA k3q6shuf<>+64(SB)/8, $0x808080808080808
DATA k3q6shuf<>+72(SB)/8, $0x909090909090909
DATA k3q6shuf<>+80(SB)/8, $0xa0a0a0a0a0a0a0a
DATA k3q6shuf<>+88(SB)/8, $0xb0b0b0b0b0b0b0b
DATA k3q6shuf<>+96(SB)/8, $0xc0c0c0c0c0c0c0c
DATA k3q6shuf<>+104(SB)/8, $0xd0d0d0d0d0d0d0d
DATA k3q6shuf<>+112(SB)/8, $0xe0e0e0e0e0e0e0e
DATA k3q6shuf<>+120(SB)/8, $0xf0f0f0f0f0f0f0f
GLOBL k3q6shuf<>(SB), RODATA|NOPTR, $128
