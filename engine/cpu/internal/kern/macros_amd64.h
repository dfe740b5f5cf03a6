// macros_amd64.h: the assembly macros more than one kernel file uses,
// defined once (included by every kernel file of this package).

#define HSUMX(y, x, t) \
	VEXTRACTF128 $1, y, t      \
	VADDPS       t, x, x       \
	VMOVHLPS     x, x, t       \
	VADDPS       t, x, x       \
	VMOVSHDUP    x, t          \
	VADDSS       t, x, x

// STORE4 writes row r's result to out[r·ostride] (AX = out, R12 = ostride
// in bytes, R13 = 3·R12 afterwards).
#define STORE4 \
	MOVQ out_base+64(FP), AX   \
	MOVQ ostride+88(FP), R12   \
	SHLQ $2, R12               \
	LEAQ (R12)(R12*2), R13     \
	HSUMX(Y0, X0, X12)         \
	VMOVSS X0, (AX)            \
	HSUMX(Y1, X1, X12)         \
	VMOVSS X1, (AX)(R12*1)     \
	HSUMX(Y2, X2, X12)         \
	VMOVSS X2, (AX)(R12*2)     \
	HSUMX(Y3, X3, X12)         \
	VMOVSS X3, (AX)(R13*1)

#define BF16LOAD(a, y) VPMOVZXWD a, y; VPSLLD $16, y, y

// RED4 reduces the four lanes of x into its low lane (ggml's acc_m reduction).
#define RED4(x, t) \
	VMOVHLPS     x, x, t       \
	VADDPS       t, x, x       \
	VMOVSHDUP    x, t          \
	VADDSS       t, x, x

// PAIR sets Y12 to [int16 at lo ×8 | int16 at hi ×8] (X13 scratch).
#define PAIR(lo, hi) \
	VPBROADCASTW lo, X12       \
	VPBROADCASTW hi, X13       \
	VINSERTI128  $1, X13, Y12, Y12

// SROW: sum += madd(Y12, maddubs(|w| (Y5), a·sign(w) (w in Y4))).
#define SROW(a, sum) \
	VMOVDQU    a, Y13          \
	VPSIGNB    Y4, Y13, Y13    \
	VPMADDUBSW Y13, Y5, Y13    \
	VPMADDWD   Y12, Y13, Y13   \
	VPADDD     Y13, sum, sum

#define SROWS1(o) SROW(o(DI), Y8)

#define Q3W(q, shift) \
	VMOVDQU  q, Y4               \
	VPSRLW   $shift, Y4, Y4      \
	VPAND    Y15, Y4, Y4         \
	VPAND    bytes01<>(SB), Y7, Y5 \
	VPSLLW   $2, Y5, Y5          \
	VPOR     Y5, Y4, Y4          \
	VPSRLW   $1, Y7, Y7          \
	VPSUBB   bytes04<>(SB), Y4, Y4 \
	VPSIGNB  Y4, Y4, Y5

// Q2MIN: acc = fma(−dmin_w·d_a, float(madd(mins, bsums)), acc) (Y6 = dmin_w).
#define Q2MIN(a, b, acc) \
	VMOVDQU      b, Y12          \
	VPMADDWD     32(SP), Y12, Y12 \
	VCVTDQ2PS    Y12, Y12        \
	VBROADCASTSS a, Y13          \
	VMULPS       Y6, Y13, Y13    \
	VFNMADD231PS Y12, Y13, acc

#define Q2Q(q, shift) \
	VMOVDQU  q, Y4               \
	VPSRLW   $shift, Y4, Y4      \
	VPAND    Y15, Y4, Y4

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

// XSW: codebook values of the 16 index bytes at q in Y4, |values| in Y5,
// the sub-block scale in Y12.
#define XSW(q, s) \
	VMOVDQU      q, X4             \
	VPSRLW       $4, X4, X5        \
	VINSERTI128  $1, X5, Y4, Y4    \
	VPAND        Y14, Y4, Y4       \
	VPSHUFB      Y4, Y7, Y4        \
	VPSIGNB      Y4, Y4, Y5        \
	VPBROADCASTW s, Y12

// Q6DFMA: acc = fma(d_w·d_a, float(sum), acc) with d_w in Y12.
#define Q6DFMA(dA, sum, acc) \
	VCVTDQ2PS    sum, sum      \
	VBROADCASTSS dA, Y13       \
	VMULPS       Y12, Y13, Y13 \
	VFMADD231PS  sum, Y13, acc

#define ONES16 VPCMPEQW Y15, Y15, Y15; VPSRLW $15, Y15, Y15

// STORER4 reduces the four accumulators into out[0..3] (AX = out).
#define STORER4 \
	MOVQ   out_base+64(FP), AX \
	HSUMX(Y0, X0, X12)         \
	VMOVSS X0, (AX)            \
	HSUMX(Y1, X1, X12)         \
	VMOVSS X1, 4(AX)           \
	HSUMX(Y2, X2, X12)         \
	VMOVSS X2, 8(AX)           \
	HSUMX(Y3, X3, X12)         \
	VMOVSS X3, 12(AX)

#define ARGST8 \
	MOVQ n+0(FP), CX           \
	MOVQ w_base+8(FP), SI      \
	MOVQ a_base+32(FP), DI     \
	MOVQ stride+56(FP), R8     \
	MOVQ sc_base+64(FP), BX    \
	LEAQ (R8)(R8*2), R9        \
	LEAQ (R8)(R8*4), R10       \
	LEAQ (R9)(R8*4), R11       \
	SHRQ $5, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3          \
	VXORPS Y7, Y7, Y7          \
	VXORPS Y8, Y8, Y8          \
	VXORPS Y9, Y9, Y9          \
	VXORPS Y10, Y10, Y10

// STORE8ACC writes the hsum_float_8 of the eight row accumulators (Y0..Y3,
// Y7..Y10) to out[r·ostride], out's address in AX and ostride (floats) in
// R12 (R12, R13, DX scratch).
#define STORE8ACC \
	SHLQ $2, R12               \
	LEAQ (R12)(R12*2), R13     \
	LEAQ (R12)(R12*4), DX      \
	HSUMX(Y0, X0, X12)         \
	VMOVSS X0, (AX)            \
	HSUMX(Y1, X1, X12)         \
	VMOVSS X1, (AX)(R12*1)     \
	HSUMX(Y2, X2, X12)         \
	VMOVSS X2, (AX)(R12*2)     \
	HSUMX(Y3, X3, X12)         \
	VMOVSS X3, (AX)(R13*1)     \
	HSUMX(Y7, X7, X12)         \
	VMOVSS X7, (AX)(R12*4)     \
	HSUMX(Y8, X8, X12)         \
	VMOVSS X8, (AX)(DX*1)      \
	HSUMX(Y9, X9, X12)         \
	VMOVSS X9, (AX)(R13*2)     \
	LEAQ   (R13)(R12*4), DX    \
	HSUMX(Y10, X10, X12)       \
	VMOVSS X10, (AX)(DX*1)

// STORET8 writes row r's hsum_float_8 to out[r·ostride].
#define STORET8 \
	MOVQ out_base+88(FP), AX   \
	MOVQ ostride+112(FP), R12  \
	STORE8ACC

// SCALES: Y4 = d_w·sc[8b..8b+7] (d_w the fp16 at d), stored at 0(SP).
#define SCALES(d) \
	VPBROADCASTW d, X4         \
	VCVTPH2PS    X4, Y4        \
	VMULPS       (BX), Y4, Y4  \
	VMOVUPS      Y4, 0(SP)

// KSCTIN(x, y): the super-block's 8 scales (low half) and 8 mins (high
// half) as int16 in y (x its low half; AX, DX, R12, R13 scratch), the same
// values as KSCALES.
#define KSCTIN(x, y) \
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
	VMOVQ R13, x               \
	VPINSRQ $1, DX, x, x       \
	VPMOVZXBW x, y

// KSCT is KSCTIN into Y15.
#define KSCT KSCTIN(X15, Y15)
