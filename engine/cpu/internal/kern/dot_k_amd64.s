//go:build amd64 && !noasm

#include "textflag.h"

// Kernels for the 256-value super-block types that pair with Q8_K
// activations (float32 d at 0, 256 int8 quants at 4, 16 int16 bsums at 260):
// Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS.
//
// Per super-block the integer sum Σ_sb scale_sb·Σ q·a is built in int32 lanes
// (VPMADDUBSW of unsigned quants by signed activations, then VPMADDWD by the
// sub-block scale broadcast as int16), converted once and accumulated with
// d_w·d_a. Offsets (Q6_K's −32, Q3_K's −4) and mins (Q4_K, Q5_K, Q2_K) are
// applied through Q8_K's bsums, exactly in integers. The decoded int16
// sub-block scales sit in a 32-byte frame at 0(SP).

#define BCASTD(v, x, y) MOVL v, AX; VMOVD AX, x; VPBROADCASTD x, y
#define HSUM8 VEXTRACTF128 $1, Y0, X1; VADDPS X1, X0, X0; VMOVHLPS X0, X0, X1; VADDPS X1, X0, X0; VMOVSHDUP X0, X1; VADDSS X1, X0, X0

#define ARGS \
	MOVQ n+0(FP), CX        \
	MOVQ w_base+8(FP), SI   \
	MOVQ a_base+32(FP), DI  \
	SHRQ $8, CX             \
	VXORPS Y0, Y0, Y0       \
	VXORPS Y1, Y1, Y1

#define RESULT \
	VSUBPS Y1, Y0, Y0       \
	HSUM8                   \
	VZEROUPPER              \
	MOVSS X0, ret+56(FP)    \
	RET

// DSCALE sets dst to fp16(at w)·d_a (d_a = float32 at 0(DI)).
#define DSCALE(w, dst, xdst) \
	VPBROADCASTW w, xdst         \
	VCVTPH2PS    xdst, dst       \
	VBROADCASTSS 0(DI), Y11      \
	VMULPS       Y11, dst, dst

// PAIRSCALE sets Y5 to [int16 scale at lo ×8 | int16 scale at hi ×8].
#define PAIRSCALE(lo, hi) \
	VPBROADCASTW lo, X5          \
	VPBROADCASTW hi, X6          \
	VINSERTI128  $1, X6, Y5, Y5

// ---- Q4_K: fp16 d, fp16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes nibbles

// KSCALES decodes the 12 scale bytes at off(SI) of a Q4_K/Q5_K block into
// 16 int16 (8 scales, then 8 mins) in Y7 and at 0(SP) (ggml's utmp dance).
#define KSCALES(off) \
	MOVL off(SI), R10            \
	MOVL off+4(SI), R11          \
	MOVL off+8(SI), R12          \
	MOVL R12, AX                 \
	SHRL $4, AX                  \
	ANDL $0x0f0f0f0f, AX         \
	MOVL R11, BX                 \
	SHRL $6, BX                  \
	ANDL $0x03030303, BX         \
	SHLL $4, BX                  \
	ORL  BX, AX                  \
	MOVL R11, BX                 \
	ANDL $0x3f3f3f3f, BX         \
	MOVL R12, DX                 \
	ANDL $0x0f0f0f0f, DX         \
	MOVL R10, R13                \
	SHRL $6, R13                 \
	ANDL $0x03030303, R13        \
	SHLL $4, R13                 \
	ORL  R13, DX                 \
	ANDL $0x3f3f3f3f, R10        \
	VMOVD   R10, X7              \
	VPINSRD $1, DX, X7, X7       \
	VPINSRD $2, BX, X7, X7       \
	VPINSRD $3, AX, X7, X7       \
	VPMOVZXBW X7, Y7             \
	VMOVDQU Y7, 0(SP)

// KMINS accumulates Σ_sb min_sb·(bsum_2sb + bsum_2sb+1) times dmin·d_a
// (fp16 dmin at 2(SI)) into Y1. Needs Y7 from KSCALES.
#define KMINS \
	VMOVDQU      260(DI), Y8       \
	VEXTRACTI128 $1, Y8, X9        \
	VPHADDW      X9, X8, X8        \
	VEXTRACTI128 $1, Y7, X9        \
	VPMADDWD     X9, X8, X8        \
	VCVTDQ2PS    Y8, Y8            \
	DSCALE(2(SI), Y10, X10)        \
	VFMADD231PS  Y8, Y10, Y1

// Q4KCHUNK adds 64 values: low nibbles of 32 bytes at q against a0 with
// the scale at s0, high nibbles against a1 with the scale at s1.
#define Q4KCHUNK(q, a0, a1, s0, s1) \
	VMOVDQU      q, Y4             \
	VPSRLW       $4, Y4, Y5        \
	VPAND        Y14, Y4, Y4       \
	VPAND        Y14, Y5, Y5       \
	VPMADDUBSW   a0, Y4, Y4        \
	VPMADDUBSW   a1, Y5, Y5        \
	VPBROADCASTW s0, Y6            \
	VPBROADCASTW s1, Y7            \
	VPMADDWD     Y6, Y4, Y4        \
	VPMADDWD     Y7, Y5, Y5        \
	VPADDD       Y4, Y12, Y12      \
	VPADDD       Y5, Y12, Y12

// func dotQ4_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $32-60
	ARGS
	BCASTD($0x0f0f0f0f, X14, Y14)
	TESTQ CX, CX
	JZ    q4kdone

q4kloop:
	KSCALES(4)
	KMINS
	DSCALE(0(SI), Y10, X10)
	VPXOR Y12, Y12, Y12
	Q4KCHUNK(16(SI), 4(DI), 36(DI), 0(SP), 2(SP))
	Q4KCHUNK(48(SI), 68(DI), 100(DI), 4(SP), 6(SP))
	Q4KCHUNK(80(SI), 132(DI), 164(DI), 8(SP), 10(SP))
	Q4KCHUNK(112(SI), 196(DI), 228(DI), 12(SP), 14(SP))
	VCVTDQ2PS   Y12, Y12
	VFMADD231PS Y12, Y10, Y0
	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q4kloop

q4kdone:
	RESULT

// ---- Q5_K: Q4_K plus 32 bytes of fifth bits (qh) before the nibbles -------

// Q5KCHUNK is Q4KCHUNK with the next two bit planes of Y13 (qh, shifted
// right one plane per use; Y15 = bytes 0x01) ORed in as bit 4.
#define Q5KCHUNK(q, a0, a1, s0, s1) \
	VMOVDQU      q, Y4             \
	VPSRLW       $4, Y4, Y5        \
	VPAND        Y14, Y4, Y4       \
	VPAND        Y14, Y5, Y5       \
	VPAND        Y15, Y13, Y6       \
	VPSLLW       $4, Y6, Y6        \
	VPOR         Y6, Y4, Y4        \
	VPSRLW       $1, Y13, Y13      \
	VPAND        Y15, Y13, Y6       \
	VPSLLW       $4, Y6, Y6        \
	VPOR         Y6, Y5, Y5        \
	VPSRLW       $1, Y13, Y13      \
	VPMADDUBSW   a0, Y4, Y4        \
	VPMADDUBSW   a1, Y5, Y5        \
	VPBROADCASTW s0, Y6            \
	VPBROADCASTW s1, Y7            \
	VPMADDWD     Y6, Y4, Y4        \
	VPMADDWD     Y7, Y5, Y5        \
	VPADDD       Y4, Y12, Y12      \
	VPADDD       Y5, Y12, Y12

// func dotQ5_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $32-60
	ARGS
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x01010101, X15, Y15)
	TESTQ CX, CX
	JZ    q5kdone

q5kloop:
	KSCALES(4)
	KMINS
	DSCALE(0(SI), Y10, X10)
	VMOVDQU 16(SI), Y13
	VPXOR Y12, Y12, Y12
	Q5KCHUNK(48(SI), 4(DI), 36(DI), 0(SP), 2(SP))
	Q5KCHUNK(80(SI), 68(DI), 100(DI), 4(SP), 6(SP))
	Q5KCHUNK(112(SI), 132(DI), 164(DI), 8(SP), 10(SP))
	Q5KCHUNK(144(SI), 196(DI), 228(DI), 12(SP), 14(SP))
	VCVTDQ2PS   Y12, Y12
	VFMADD231PS Y12, Y10, Y0
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q5kloop

q5kdone:
	RESULT

// ---- Q6_K: ql[128], qh[64], int8 scales[16], fp16 d ------------------------
// q = (4 low bits | 2 high bits << 4) − 32; the −32 is applied as
// −32·Σ_sb scale_sb·bsum_sb.

// Q6KGROUP adds 32 values: 4-bit part already in Y4 (0..15), the next
// 2-bit plane of Y13 (qh, shifted two bits per use; Y9 = bytes 0x03),
// activations at a, scales at s0/s1.
#define Q6KGROUP(a, s0, s1) \
	VPAND        Y9, Y13, Y6       \
	VPSLLW       $4, Y6, Y6        \
	VPOR         Y6, Y4, Y4        \
	VPSRLW       $2, Y13, Y13      \
	VPMADDUBSW   a, Y4, Y4         \
	PAIRSCALE(s0, s1)              \
	VPMADDWD     Y5, Y4, Y4        \
	VPADDD       Y4, Y12, Y12

// Q6KHALF adds 128 values: ql at q, qh at h, activations from a.
#define Q6KHALF(q, q32, h, a0, a1, a2, a3, s0, s1, s2, s3, s4, s5, s6, s7) \
	VMOVDQU  q, Y2                 \
	VMOVDQU  q32, Y3               \
	VMOVDQU  h, Y13                \
	VPAND    Y14, Y2, Y4           \
	Q6KGROUP(a0, s0, s1)           \
	VPAND    Y14, Y3, Y4           \
	Q6KGROUP(a1, s2, s3)           \
	VPSRLW   $4, Y2, Y4            \
	VPAND    Y14, Y4, Y4           \
	Q6KGROUP(a2, s4, s5)           \
	VPSRLW   $4, Y3, Y4            \
	VPAND    Y14, Y4, Y4           \
	Q6KGROUP(a3, s6, s7)

// func dotQ6_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $32-60
	ARGS
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x03030303, X9, Y9)
	TESTQ CX, CX
	JZ    q6kdone

q6kloop:
	VPMOVSXBW 192(SI), Y7
	VMOVDQU   Y7, 0(SP)
	VPMADDWD  260(DI), Y7, Y8
	VPSLLD    $5, Y8, Y8
	VPXOR     Y12, Y12, Y12
	VPSUBD    Y8, Y12, Y12
	DSCALE(208(SI), Y10, X10)
	Q6KHALF(0(SI), 32(SI), 128(SI), 4(DI), 36(DI), 68(DI), 100(DI), 0(SP), 2(SP), 4(SP), 6(SP), 8(SP), 10(SP), 12(SP), 14(SP))
	Q6KHALF(64(SI), 96(SI), 160(SI), 132(DI), 164(DI), 196(DI), 228(DI), 16(SP), 18(SP), 20(SP), 22(SP), 24(SP), 26(SP), 28(SP), 30(SP))
	VCVTDQ2PS   Y12, Y12
	VFMADD231PS Y12, Y10, Y0
	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q6kloop

q6kdone:
	RESULT

// ---- Q2_K: scales[16] (4-bit scale | 4-bit min << 4), qs[64], fp16 d, dmin --

// Q2KGROUP adds 32 values: 2-bit quants in Y4 (0..3), activations at a.
#define Q2KGROUP(a, s0, s1) \
	VPMADDUBSW   a, Y4, Y4         \
	PAIRSCALE(s0, s1)              \
	VPMADDWD     Y5, Y4, Y4        \
	VPADDD       Y4, Y12, Y12

#define Q2KHALF(q, a0, a1, a2, a3, s0, s1, s2, s3, s4, s5, s6, s7) \
	VMOVDQU  q, Y2                 \
	VPAND    Y9, Y2, Y4            \
	Q2KGROUP(a0, s0, s1)           \
	VPSRLW   $2, Y2, Y4            \
	VPAND    Y9, Y4, Y4            \
	Q2KGROUP(a1, s2, s3)           \
	VPSRLW   $4, Y2, Y4            \
	VPAND    Y9, Y4, Y4            \
	Q2KGROUP(a2, s4, s5)           \
	VPSRLW   $6, Y2, Y4            \
	VPAND    Y9, Y4, Y4            \
	Q2KGROUP(a3, s6, s7)

// func dotQ2_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ2_KAVX2(SB), NOSPLIT, $32-60
	ARGS
	BCASTD($0x03030303, X9, Y9)
	BCASTD($0x000f000f, X13, Y13)
	TESTQ CX, CX
	JZ    q2kdone

q2kloop:
	VPMOVZXBW 0(SI), Y7
	VPSRLW    $4, Y7, Y8
	VPAND     Y13, Y7, Y7
	VMOVDQU   Y7, 0(SP)
	VPMADDWD  260(DI), Y8, Y8
	VCVTDQ2PS Y8, Y8
	DSCALE(82(SI), Y10, X10)
	VFMADD231PS Y8, Y10, Y1
	DSCALE(80(SI), Y10, X10)
	VPXOR Y12, Y12, Y12
	Q2KHALF(16(SI), 4(DI), 36(DI), 68(DI), 100(DI), 0(SP), 2(SP), 4(SP), 6(SP), 8(SP), 10(SP), 12(SP), 14(SP))
	Q2KHALF(48(SI), 132(DI), 164(DI), 196(DI), 228(DI), 16(SP), 18(SP), 20(SP), 22(SP), 24(SP), 26(SP), 28(SP), 30(SP))
	VCVTDQ2PS   Y12, Y12
	VFMADD231PS Y12, Y10, Y0
	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q2kloop

q2kdone:
	RESULT

// ---- Q3_K: hmask[32], qs[64], scales[12] (16 × 6 bits), fp16 d -------------
// q = (2 low bits | hmask bit << 2) − 4; the −4 is applied as
// −4·Σ_sb scale_sb·bsum_sb.

// Q3KGROUP: 2-bit part in Y4; ORs in the next plane of Y3 (hmask, one bit
// plane per use; Y11 = bytes 0x01) as bit 2.
#define Q3KGROUP(a, s0, s1) \
	VPAND        Y8, Y3, Y6        \
	VPSLLW       $2, Y6, Y6        \
	VPOR         Y6, Y4, Y4        \
	VPSRLW       $1, Y3, Y3        \
	VPMADDUBSW   a, Y4, Y4         \
	PAIRSCALE(s0, s1)              \
	VPMADDWD     Y5, Y4, Y4        \
	VPADDD       Y4, Y12, Y12

#define Q3KHALF(q, a0, a1, a2, a3, s0, s1, s2, s3, s4, s5, s6, s7) \
	VMOVDQU  q, Y2                 \
	VPAND    Y9, Y2, Y4            \
	Q3KGROUP(a0, s0, s1)           \
	VPSRLW   $2, Y2, Y4            \
	VPAND    Y9, Y4, Y4            \
	Q3KGROUP(a1, s2, s3)           \
	VPSRLW   $4, Y2, Y4            \
	VPAND    Y9, Y4, Y4            \
	Q3KGROUP(a2, s4, s5)           \
	VPSRLW   $6, Y2, Y4            \
	VPAND    Y9, Y4, Y4            \
	Q3KGROUP(a3, s6, s7)

// func dotQ3_KAVX2(n int, w, a []byte) float32
TEXT ·dotQ3_KAVX2(SB), NOSPLIT, $32-60
	ARGS
	BCASTD($0x03030303, X9, Y9)
	BCASTD($0x01010101, X8, Y8)
	BCASTD($0x00200020, X13, Y13)
	TESTQ CX, CX
	JZ    q3kdone

q3kloop:
	MOVL 96(SI), R10
	MOVL 100(SI), R11
	MOVL 104(SI), R12
	// s0 = (a0 & 0x0f0f0f0f) | ((t & 0x03030303) << 4)
	MOVL R10, AX
	ANDL $0x0f0f0f0f, AX
	MOVL R12, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL  BX, AX
	VMOVD AX, X7
	// s1 = (a1 & 0x0f0f0f0f) | (((t >> 2) & 0x03030303) << 4)
	MOVL R11, AX
	ANDL $0x0f0f0f0f, AX
	MOVL R12, BX
	SHRL $2, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL  BX, AX
	VPINSRD $1, AX, X7, X7
	// s2 = ((a0 >> 4) & 0x0f0f0f0f) | (((t >> 4) & 0x03030303) << 4)
	MOVL R10, AX
	SHRL $4, AX
	ANDL $0x0f0f0f0f, AX
	MOVL R12, BX
	SHRL $4, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL  BX, AX
	VPINSRD $2, AX, X7, X7
	// s3 = ((a1 >> 4) & 0x0f0f0f0f) | (((t >> 6) & 0x03030303) << 4)
	MOVL R11, AX
	SHRL $4, AX
	ANDL $0x0f0f0f0f, AX
	MOVL R12, BX
	SHRL $6, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL  BX, AX
	VPINSRD $3, AX, X7, X7
	VPMOVZXBW X7, Y7
	VPSUBW    Y13, Y7, Y7
	VMOVDQU   Y7, 0(SP)
	VPMADDWD  260(DI), Y7, Y6
	VPSLLD    $2, Y6, Y6
	VPXOR     Y12, Y12, Y12
	VPSUBD    Y6, Y12, Y12
	DSCALE(108(SI), Y10, X10)
	VMOVDQU   0(SI), Y3
	Q3KHALF(32(SI), 4(DI), 36(DI), 68(DI), 100(DI), 0(SP), 2(SP), 4(SP), 6(SP), 8(SP), 10(SP), 12(SP), 14(SP))
	Q3KHALF(64(SI), 132(DI), 164(DI), 196(DI), 228(DI), 16(SP), 18(SP), 20(SP), 22(SP), 24(SP), 26(SP), 28(SP), 30(SP))
	VCVTDQ2PS   Y12, Y12
	VFMADD231PS Y12, Y10, Y0
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q3kloop

q3kdone:
	RESULT

// ---- IQ4_XS: fp16 d, scales_h u16, scales_l[4], 128 bytes of codebook indices

// IQ4XSLS computes sub-block ib's scale (ls − 32) into AX and stores it as
// int16 at off(SP). R10 = scales_l (u32), R11 = scales_h.
#define IQ4XSLS(sl, sh, off) \
	MOVL R10, AX                   \
	SHRL $sl, AX                   \
	ANDL $15, AX                   \
	MOVL R11, BX                   \
	SHRL $sh, BX                   \
	ANDL $3, BX                    \
	SHLL $4, BX                    \
	ORL  BX, AX                    \
	SUBL $32, AX                   \
	MOVW AX, off(SP)

// IQ4XSSUB adds 32 values: codebook indices (16 bytes at q), activations at a.
#define IQ4XSSUB(q, a, s) \
	VMOVDQU      q, X4             \
	VPSRLW       $4, X4, X7        \
	VINSERTI128  $1, X7, Y4, Y4    \
	VPAND        Y14, Y4, Y4       \
	VPSHUFB      Y4, Y9, Y4        \
	VMOVDQU      a, Y5             \
	VPSIGNB      Y4, Y4, Y6        \
	VPSIGNB      Y4, Y5, Y5        \
	VPMADDUBSW   Y5, Y6, Y6        \
	VPBROADCASTW s, Y7             \
	VPMADDWD     Y7, Y6, Y6        \
	VPADDD       Y6, Y12, Y12

// func dotIQ4_XSAVX2(n int, w, a []byte) float32
TEXT ·dotIQ4_XSAVX2(SB), NOSPLIT, $32-60
	ARGS
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y9
	TESTQ CX, CX
	JZ    iq4xsdone

iq4xsloop:
	MOVL    4(SI), R10
	MOVWLZX 2(SI), R11
	IQ4XSLS(0, 0, 0)
	IQ4XSLS(4, 2, 2)
	IQ4XSLS(8, 4, 4)
	IQ4XSLS(12, 6, 6)
	IQ4XSLS(16, 8, 8)
	IQ4XSLS(20, 10, 10)
	IQ4XSLS(24, 12, 12)
	IQ4XSLS(28, 14, 14)
	DSCALE(0(SI), Y10, X10)
	VPXOR Y12, Y12, Y12
	IQ4XSSUB(8(SI), 4(DI), 0(SP))
	IQ4XSSUB(24(SI), 36(DI), 2(SP))
	IQ4XSSUB(40(SI), 68(DI), 4(SP))
	IQ4XSSUB(56(SI), 100(DI), 6(SP))
	IQ4XSSUB(72(SI), 132(DI), 8(SP))
	IQ4XSSUB(88(SI), 164(DI), 10(SP))
	IQ4XSSUB(104(SI), 196(DI), 12(SP))
	IQ4XSSUB(120(SI), 228(DI), 14(SP))
	VCVTDQ2PS   Y12, Y12
	VFMADD231PS Y12, Y10, Y0
	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq4xsloop

iq4xsdone:
	RESULT
