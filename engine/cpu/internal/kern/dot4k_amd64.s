//go:build amd64 && !noasm

#include "textflag.h"

// Four-row kernels for the k-quants (see dot4_amd64.s for the calling
// convention). All macros come before the first TEXT so that vet's asmdecl
// reads them with the right frame.

#define ARGS4(shift) \
	MOVQ n+0(FP), CX              \
	MOVQ w_base+8(FP), SI         \
	MOVQ a_base+32(FP), DI        \
	MOVQ stride+56(FP), R8        \
	LEAQ (R8)(R8*2), R9           \
	SHRQ $shift, CX               \
	VXORPS Y0, Y0, Y0             \
	VXORPS Y1, Y1, Y1             \
	VXORPS Y2, Y2, Y2             \
	VXORPS Y3, Y3, Y3

#define STORE4 \
	MOVQ         out+64(FP), AX   \
	VHADDPS      Y1, Y0, Y0       \
	VHADDPS      Y3, Y2, Y2       \
	VHADDPS      Y2, Y0, Y0       \
	VEXTRACTF128 $1, Y0, X1       \
	VADDPS       X1, X0, X0       \
	VMOVUPS      X0, (AX)         \
	VZEROUPPER                    \
	RET

#define BCASTD(v, x, y) MOVL v, BX; VMOVD BX, x; VPBROADCASTD x, y

#define KSCALES4(off) \
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

// KMIN4 subtracts row r's Σ min·bsum-pair times dmin_w·d_a (Y6 = dmin_w).
#define KMIN4(bs, dA, acc) \
	VMOVDQU      bs, Y12           \
	VEXTRACTI128 $1, Y12, X13      \
	VPHADDW      X13, X12, X12     \
	VPMADDWD     16(SP), X12, X12  \
	VCVTDQ2PS    Y12, Y12          \
	VBROADCASTSS dA, Y13           \
	VMULPS       Y6, Y13, Y13      \
	VFNMADD231PS Y12, Y13, acc

#define KMINS4 \
	VPBROADCASTW 2(SI), X6                   \
	VCVTPH2PS    X6, Y6                      \
	KMIN4(260(DI), (DI), Y0)                 \
	KMIN4(260(DI)(R8*1), (DI)(R8*1), Y1)     \
	KMIN4(260(DI)(R8*2), (DI)(R8*2), Y2)     \
	KMIN4(260(DI)(R9*1), (DI)(R9*1), Y3)

// KROW adds one row's 64 values of the chunk (Y4/Y5 quants, Y6/Y7 scales).
#define KROW(a0, a1, sum) \
	VPMADDUBSW   a0, Y4, Y12       \
	VPMADDWD     Y6, Y12, Y12      \
	VPADDD       Y12, sum, sum     \
	VPMADDUBSW   a1, Y5, Y13       \
	VPMADDWD     Y7, Y13, Y13      \
	VPADDD       Y13, sum, sum

#define KROWS(o, s0, s1) \
	VPBROADCASTW s0, Y6                            \
	VPBROADCASTW s1, Y7                            \
	KROW(o(DI), o+32(DI), Y8)                      \
	KROW(o(DI)(R8*1), o+32(DI)(R8*1), Y9)          \
	KROW(o(DI)(R8*2), o+32(DI)(R8*2), Y10)         \
	KROW(o(DI)(R9*1), o+32(DI)(R9*1), Y11)

// KFINISH adds each row's int32 sum times d_w·d_a (Y15 = d_w).
#define KFIN(dA, sum, acc) \
	VCVTDQ2PS    sum, sum          \
	VBROADCASTSS dA, Y13           \
	VMULPS       Y15, Y13, Y13     \
	VFMADD231PS  sum, Y13, acc

#define KFINISH \
	KFIN((DI), Y8, Y0)             \
	KFIN((DI)(R8*1), Y9, Y1)       \
	KFIN((DI)(R8*2), Y10, Y2)      \
	KFIN((DI)(R9*1), Y11, Y3)

#define KZERO \
	VPXOR Y8, Y8, Y8               \
	VPXOR Y9, Y9, Y9               \
	VPXOR Y10, Y10, Y10            \
	VPXOR Y11, Y11, Y11

#define Q4K4CHUNK(q, o, s0, s1) \
	VMOVDQU      q, Y4             \
	VPSRLW       $4, Y4, Y5        \
	VPAND        Y14, Y4, Y4       \
	VPAND        Y14, Y5, Y5       \
	KROWS(o, s0, s1)

// Q5K4CHUNK: Q4K4CHUNK plus two planes of qh (Y15 during the chunks; the
// bytes 0x01 mask is rebuilt in Y6 first and overwritten by the scales).
#define Q5K4CHUNK(q, o, s0, s1) \
	VMOVDQU      q, Y4             \
	VPSRLW       $4, Y4, Y5        \
	VPAND        Y14, Y4, Y4       \
	VPAND        Y14, Y5, Y5       \
	BCASTD($0x01010101, X6, Y6)    \
	VPAND        Y6, Y15, Y7       \
	VPSLLW       $4, Y7, Y7        \
	VPOR         Y7, Y4, Y4        \
	VPSRLW       $1, Y15, Y15      \
	VPAND        Y6, Y15, Y7       \
	VPSLLW       $4, Y7, Y7        \
	VPOR         Y7, Y5, Y5        \
	VPSRLW       $1, Y15, Y15      \
	KROWS(o, s0, s1)

#define Q6ROW(a, sum) \
	VPMADDUBSW   a, Y4, Y13        \
	VPMADDWD     Y12, Y13, Y13     \
	VPADDD       Y13, sum, sum

#define Q6GROUP(o, s0, s1) \
	VPAND        Y15, Y7, Y13      \
	VPSLLW       $4, Y13, Y13      \
	VPOR         Y13, Y4, Y4       \
	VPSRLW       $2, Y7, Y7        \
	VPBROADCASTW s0, X12           \
	VPBROADCASTW s1, X13           \
	VINSERTI128  $1, X13, Y12, Y12 \
	Q6ROW(o(DI), Y8)               \
	Q6ROW(o(DI)(R8*1), Y9)         \
	Q6ROW(o(DI)(R8*2), Y10)        \
	Q6ROW(o(DI)(R9*1), Y11)

#define Q6HALF(q, q32, h, o, s) \
	VMOVDQU  q, Y5                 \
	VMOVDQU  q32, Y6               \
	VMOVDQU  h, Y7                 \
	VPAND    Y14, Y5, Y4           \
	Q6GROUP(o, s(SP), s+2(SP))     \
	VPAND    Y14, Y6, Y4           \
	Q6GROUP(o+32, s+4(SP), s+6(SP))  \
	VPSRLW   $4, Y5, Y4            \
	VPAND    Y14, Y4, Y4           \
	Q6GROUP(o+64, s+8(SP), s+10(SP)) \
	VPSRLW   $4, Y6, Y4            \
	VPAND    Y14, Y4, Y4           \
	Q6GROUP(o+96, s+12(SP), s+14(SP))

// Q6INIT sets sum to −32·Σ_sb scale_sb·bsum_sb of the row whose bsums are at bs.
#define Q6INIT(bs, sum) \
	VMOVDQU  bs, Y13               \
	VPMADDWD 0(SP), Y13, Y13       \
	VPSLLD   $5, Y13, Y13          \
	VPXOR    sum, sum, sum         \
	VPSUBD   Y13, sum, sum

#define Q6FIN(dA, sum, acc) \
	VCVTDQ2PS    sum, sum          \
	VBROADCASTSS dA, Y13           \
	VMULPS       Y12, Y13, Y13     \
	VFMADD231PS  sum, Y13, acc


// QGROUP4 multiplies the 32 quants in Y4 into the four rows' sums with the
// scale pair s0 (first 16 values) and s1 (last 16) at offset o of each row.
#define QGROUP4(o, s0, s1) \
	VPBROADCASTW s0, X12           \
	VPBROADCASTW s1, X13           \
	VINSERTI128  $1, X13, Y12, Y12 \
	Q6ROW(o(DI), Y8)               \
	Q6ROW(o(DI)(R8*1), Y9)         \
	Q6ROW(o(DI)(R8*2), Y10)        \
	Q6ROW(o(DI)(R9*1), Y11)

// Q2MIN subtracts a row's Σ min_sb·bsum_sb times dmin_w·d_a (Y6 = dmin_w,
// int16 mins at 32(SP)).
#define Q2MIN(bs, dA, acc) \
	VMOVDQU      bs, Y12           \
	VPMADDWD     32(SP), Y12, Y12  \
	VCVTDQ2PS    Y12, Y12          \
	VBROADCASTSS dA, Y13           \
	VMULPS       Y6, Y13, Y13      \
	VFNMADD231PS Y12, Y13, acc

// Q2HALF4 adds 128 values: 2-bit planes of the 32 bytes at q.
#define Q2HALF4(q, o, s) \
	VMOVDQU  q, Y5                 \
	VPAND    Y14, Y5, Y4           \
	QGROUP4(o, s(SP), s+2(SP))     \
	VPSRLW   $2, Y5, Y4            \
	VPAND    Y14, Y4, Y4           \
	QGROUP4(o+32, s+4(SP), s+6(SP))  \
	VPSRLW   $4, Y5, Y4            \
	VPAND    Y14, Y4, Y4           \
	QGROUP4(o+64, s+8(SP), s+10(SP)) \
	VPSRLW   $6, Y5, Y4            \
	VPAND    Y14, Y4, Y4           \
	QGROUP4(o+96, s+12(SP), s+14(SP))

// Q3HBIT ORs the next hmask plane of Y7 (one bit per use; Y6 = bytes 0x01)
// into Y4 as bit 2.
#define Q3HBIT \
	VPAND    Y6, Y7, Y13           \
	VPSLLW   $2, Y13, Y13          \
	VPOR     Y13, Y4, Y4           \
	VPSRLW   $1, Y7, Y7

#define Q3HALF4(q, o, s) \
	VMOVDQU  q, Y5                 \
	VPAND    Y14, Y5, Y4           \
	Q3HBIT                         \
	QGROUP4(o, s(SP), s+2(SP))     \
	VPSRLW   $2, Y5, Y4            \
	VPAND    Y14, Y4, Y4           \
	Q3HBIT                         \
	QGROUP4(o+32, s+4(SP), s+6(SP))  \
	VPSRLW   $4, Y5, Y4            \
	VPAND    Y14, Y4, Y4           \
	Q3HBIT                         \
	QGROUP4(o+64, s+8(SP), s+10(SP)) \
	VPSRLW   $6, Y5, Y4            \
	VPAND    Y14, Y4, Y4           \
	Q3HBIT                         \
	QGROUP4(o+96, s+12(SP), s+14(SP))

// Q3INIT sets sum to −4·Σ_sb scale_sb·bsum_sb of the row whose bsums are at bs.
#define Q3INIT(bs, sum) \
	VMOVDQU  bs, Y13               \
	VPMADDWD 0(SP), Y13, Y13       \
	VPSLLD   $2, Y13, Y13          \
	VPXOR    sum, sum, sum         \
	VPSUBD   Y13, sum, sum

// XSROW adds one row's 32 values: signed codebook values in Y4, |values|
// in Y5, scale (int16) in Y12.
#define XSROW(a, sum) \
	VMOVDQU      a, Y13            \
	VPSIGNB      Y4, Y13, Y13      \
	VPMADDUBSW   Y13, Y5, Y13      \
	VPMADDWD     Y12, Y13, Y13     \
	VPADDD       Y13, sum, sum

#define XSSUB4(q, o, s) \
	VMOVDQU      q, X4             \
	VPSRLW       $4, X4, X5        \
	VINSERTI128  $1, X5, Y4, Y4    \
	VPAND        Y14, Y4, Y4       \
	VPSHUFB      Y4, Y15, Y4       \
	VPSIGNB      Y4, Y4, Y5        \
	VPBROADCASTW s, Y12            \
	XSROW(o(DI), Y8)               \
	XSROW(o(DI)(R8*1), Y9)         \
	XSROW(o(DI)(R8*2), Y10)        \
	XSROW(o(DI)(R9*1), Y11)

#define XSLS(sl, sh, off) \
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

// ---- Q4_K and Q5_K against four Q8_K rows (292-byte blocks) ----------------
// Per super-block: the scales and mins are decoded once into 0(SP) (int16
// scales 0..7, then mins 0..7); each row's mins term goes straight into its
// accumulator (VFNMADD231PS with dmin·d_a); each 64-value chunk is unpacked
// once into Y4 (low nibbles) and Y5 (high nibbles) and multiplied into the
// rows' int32 sums Y8..Y11.










// func dot4Q4_KAVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4Q4_KAVX2(SB), NOSPLIT, $32-72
	ARGS4(8)
	BCASTD($0x0f0f0f0f, X14, Y14)

q4k4loop:
	KSCALES4(4)
	KMINS4
	KZERO
	Q4K4CHUNK(16(SI), 4, 0(SP), 2(SP))
	Q4K4CHUNK(48(SI), 68, 4(SP), 6(SP))
	Q4K4CHUNK(80(SI), 132, 8(SP), 10(SP))
	Q4K4CHUNK(112(SI), 196, 12(SP), 14(SP))
	VPBROADCASTW 0(SI), X15
	VCVTPH2PS    X15, Y15
	KFINISH
	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q4k4loop
	STORE4


// func dot4Q5_KAVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4Q5_KAVX2(SB), NOSPLIT, $32-72
	ARGS4(8)
	BCASTD($0x0f0f0f0f, X14, Y14)

q5k4loop:
	KSCALES4(4)
	KMINS4
	KZERO
	VMOVDQU 16(SI), Y15
	Q5K4CHUNK(48(SI), 4, 0(SP), 2(SP))
	Q5K4CHUNK(80(SI), 68, 4(SP), 6(SP))
	Q5K4CHUNK(112(SI), 132, 8(SP), 10(SP))
	Q5K4CHUNK(144(SI), 196, 12(SP), 14(SP))
	VPBROADCASTW 0(SI), X15
	VCVTPH2PS    X15, Y15
	KFINISH
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q5k4loop
	STORE4

// ---- Q6_K against four Q8_K rows ------------------------------------------
// Y8..Y11 the rows' int32 sums, started at −32·Σ scale·bsum; per 32-value
// group the 6-bit quants are built once in Y4 from ql (Y5, Y6) and qh (Y7)
// and the scale pair in Y12.






// func dot4Q6_KAVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4Q6_KAVX2(SB), NOSPLIT, $32-72
	ARGS4(8)
	BCASTD($0x0f0f0f0f, X14, Y14)
	BCASTD($0x03030303, X15, Y15)

q6k4loop:
	VPMOVSXBW 192(SI), Y12
	VMOVDQU   Y12, 0(SP)
	Q6INIT(260(DI), Y8)
	Q6INIT(260(DI)(R8*1), Y9)
	Q6INIT(260(DI)(R8*2), Y10)
	Q6INIT(260(DI)(R9*1), Y11)
	Q6HALF(0(SI), 32(SI), 128(SI), 4, 0)
	Q6HALF(64(SI), 96(SI), 160(SI), 132, 16)
	VPBROADCASTW 208(SI), X12
	VCVTPH2PS    X12, Y12
	Q6FIN((DI), Y8, Y0)
	Q6FIN((DI)(R8*1), Y9, Y1)
	Q6FIN((DI)(R8*2), Y10, Y2)
	Q6FIN((DI)(R9*1), Y11, Y3)
	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q6k4loop
	STORE4

// func dot4Q2_KAVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4Q2_KAVX2(SB), NOSPLIT, $64-72
	ARGS4(8)
	BCASTD($0x03030303, X14, Y14)
	BCASTD($0x000f000f, X15, Y15)

q2k4loop:
	VPMOVZXBW 0(SI), Y12
	VPSRLW    $4, Y12, Y13
	VPAND     Y15, Y12, Y12
	VMOVDQU   Y12, 0(SP)
	VMOVDQU   Y13, 32(SP)
	VPBROADCASTW 82(SI), X6
	VCVTPH2PS    X6, Y6
	Q2MIN(260(DI), (DI), Y0)
	Q2MIN(260(DI)(R8*1), (DI)(R8*1), Y1)
	Q2MIN(260(DI)(R8*2), (DI)(R8*2), Y2)
	Q2MIN(260(DI)(R9*1), (DI)(R9*1), Y3)
	KZERO
	Q2HALF4(16(SI), 4, 0)
	Q2HALF4(48(SI), 132, 16)
	VPBROADCASTW 80(SI), X12
	VCVTPH2PS    X12, Y12
	Q6FIN((DI), Y8, Y0)
	Q6FIN((DI)(R8*1), Y9, Y1)
	Q6FIN((DI)(R8*2), Y10, Y2)
	Q6FIN((DI)(R9*1), Y11, Y3)
	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q2k4loop
	STORE4

// func dot4Q3_KAVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4Q3_KAVX2(SB), NOSPLIT, $32-72
	ARGS4(8)
	BCASTD($0x03030303, X14, Y14)
	BCASTD($0x01010101, X6, Y6)
	BCASTD($0x00200020, X15, Y15)

q3k4loop:
	MOVL 96(SI), R10
	MOVL 100(SI), R11
	MOVL 104(SI), R12
	MOVL R10, AX
	ANDL $0x0f0f0f0f, AX
	MOVL R12, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL  BX, AX
	VMOVD AX, X7
	MOVL R11, AX
	ANDL $0x0f0f0f0f, AX
	MOVL R12, BX
	SHRL $2, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL  BX, AX
	VPINSRD $1, AX, X7, X7
	MOVL R10, AX
	SHRL $4, AX
	ANDL $0x0f0f0f0f, AX
	MOVL R12, BX
	SHRL $4, BX
	ANDL $0x03030303, BX
	SHLL $4, BX
	ORL  BX, AX
	VPINSRD $2, AX, X7, X7
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
	VPSUBW    Y15, Y7, Y7
	VMOVDQU   Y7, 0(SP)
	Q3INIT(260(DI), Y8)
	Q3INIT(260(DI)(R8*1), Y9)
	Q3INIT(260(DI)(R8*2), Y10)
	Q3INIT(260(DI)(R9*1), Y11)
	VMOVDQU 0(SI), Y7
	Q3HALF4(32(SI), 4, 0)
	Q3HALF4(64(SI), 132, 16)
	VPBROADCASTW 108(SI), X12
	VCVTPH2PS    X12, Y12
	Q6FIN((DI), Y8, Y0)
	Q6FIN((DI)(R8*1), Y9, Y1)
	Q6FIN((DI)(R8*2), Y10, Y2)
	Q6FIN((DI)(R9*1), Y11, Y3)
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q3k4loop
	STORE4

// func dot4IQ4_XSAVX2(n int, w, a []byte, stride int, out *[4]float32)
TEXT ·dot4IQ4_XSAVX2(SB), NOSPLIT, $32-72
	ARGS4(8)
	BCASTD($0x0f0f0f0f, X14, Y14)
	VBROADCASTI128 ·kvaluesIQ4NL(SB), Y15

iq4xs4loop:
	MOVL    4(SI), R10
	MOVWLZX 2(SI), R11
	XSLS(0, 0, 0)
	XSLS(4, 2, 2)
	XSLS(8, 4, 4)
	XSLS(12, 6, 6)
	XSLS(16, 8, 8)
	XSLS(20, 10, 10)
	XSLS(24, 12, 12)
	XSLS(28, 14, 14)
	KZERO
	XSSUB4(8(SI), 4, 0(SP))
	XSSUB4(24(SI), 36, 2(SP))
	XSSUB4(40(SI), 68, 4(SP))
	XSSUB4(56(SI), 100, 6(SP))
	XSSUB4(72(SI), 132, 8(SP))
	XSSUB4(88(SI), 164, 10(SP))
	XSSUB4(104(SI), 196, 12(SP))
	XSSUB4(120(SI), 228, 14(SP))
	VPBROADCASTW 0(SI), X12
	VCVTPH2PS    X12, Y12
	Q6FIN((DI), Y8, Y0)
	Q6FIN((DI)(R8*1), Y9, Y1)
	Q6FIN((DI)(R8*2), Y10, Y2)
	Q6FIN((DI)(R9*1), Y11, Y3)
	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq4xs4loop
	STORE4
