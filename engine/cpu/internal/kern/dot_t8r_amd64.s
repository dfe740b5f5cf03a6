//go:build amd64 && !noasm

#include "textflag.h"
#include "macros_amd64.h"

// Eight-activation-row matmul kernels (prefill) of Q8_0, Q4_0 and Q5_0 on
// repacked activations: dotT8R<T>AVX2(n, w, wstride, rows, aq, corr, sc,
// acc, flags, out, ostride) writes to out[j + r·ostride] the dot product of
// weight row j (at w[j·wstride:], j < rows) with activation row r = 0..7 of
// one group of eight, for the group laid out by
// repackQ8Group: block b of row r has its 32 quants at aq[256b + 32r] (every
// load aligned, one pointer for the eight rows), corr[256b + 32r] holds the
// eight int32 lanes bias·Σ₄a of that block (Q4_0 bias 8, Q5_0 bias 16), and
// sc[8b + r] its scale as float32 (actScales).
//
// Every row gets exactly the float32 operations of the single-row kernel
// dot<T>AVX2 in the same order: acc = fma(d_w·d_a, float(lanes), acc) block
// by block, hsum_float_8. Q8_0 forms the lanes as ggml (VPSIGNB, VPMADDUBSW,
// VPMADDWD). Q4_0 and Q5_0 take their weights unsigned (u = w + bias,
// prepared once for the eight rows) and subtract the precomputed bias·Σ₄a:
// VPMADDUBSW(u, a) reads a from memory, so a row costs one instruction less
// than the VPSIGNB form, with the same int32 lanes whenever no quant is
// −128 (QuantizeQ8_0 yields −127..127 for finite input).
//
// The products d_w·d_a of a block's eight rows are stored four blocks
// ahead in a ring of four 32-byte slots at 0(SP) and read by VBROADCASTSS:
// storing them in the block that reads them makes every read wait on
// store-to-load forwarding from the 256-bit store.
//
// A row may come in pieces (tileRFunc): flags&1 starts the accumulators at
// zero instead of reading them from acc[96j:], flags&2 reduces them into out
// instead of saving them to acc.
//
// Registers: SI weights, DI quants, R8 corrections, R9 acc, R10 flags, CX blocks left, Y0..Y3
// Y7..Y10 row accumulators, Y6 the prepared weights (Y5 |w| for Q8_0),
// Y12/Y13 temporaries, Y14 bytes 0x0F, Y15 int16 ones; ring: DX slot
// offset, AX slot address, R14/R15 weight block and scales of the block
// four ahead, R13 products left to compute.


#define STORET8R \
	MOVQ 144(SP), AX           \
	MOVQ ostride+176(FP), R12  \
	STORE8ACC

// FINISHT8R reduces the accumulators into out (flags&2) or saves them to
// acc for the next piece of the rows.
#define FINISHT8R(save, end) \
	TESTQ $2, R10              \
	JZ    save                 \
	STORET8R                   \
	JMP   end                  \
save:                          \
	VMOVUPS Y0, 0(R9)          \
	VMOVUPS Y1, 32(R9)         \
	VMOVUPS Y2, 64(R9)         \
	VMOVUPS Y3, 96(R9)         \
	VMOVUPS Y7, 128(R9)        \
	VMOVUPS Y8, 160(R9)        \
	VMOVUPS Y9, 192(R9)        \
	VMOVUPS Y10, 224(R9)       \
end:

// ARGST8R loads the arguments and the accumulators (zero, or acc's when
// flags&1 is clear). R9 acc, R10 flags.
#define ARGST8R(fresh) \
	MOVQ n+0(FP), CX           \
	MOVQ 136(SP), SI           \
	MOVQ aq_base+48(FP), DI    \
	MOVQ corr_base+72(FP), R8  \
	MOVQ sc_base+96(FP), BX    \
	SHRQ $5, CX                \
	VXORPS Y0, Y0, Y0          \
	VXORPS Y1, Y1, Y1          \
	VXORPS Y2, Y2, Y2          \
	VXORPS Y3, Y3, Y3          \
	VXORPS Y7, Y7, Y7          \
	VXORPS Y8, Y8, Y8          \
	VXORPS Y9, Y9, Y9          \
	VXORPS Y10, Y10, Y10       \
	MOVQ 152(SP), R9           \
	MOVQ flags+144(FP), R10    \
	TESTQ $1, R10              \
	JNZ  fresh                 \
	VMOVUPS 0(R9), Y0          \
	VMOVUPS 32(R9), Y1         \
	VMOVUPS 64(R9), Y2         \
	VMOVUPS 96(R9), Y3         \
	VMOVUPS 128(R9), Y7        \
	VMOVUPS 160(R9), Y8        \
	VMOVUPS 192(R9), Y9        \
	VMOVUPS 224(R9), Y10       \
fresh:

// SETUPROWS keeps the row loop's state in the frame (128 rows left, 136
// the weight row, 144 its outputs, 152 its accumulator state) and loads
// the constants (Y14 bytes 0x0F, Y15 int16 ones).
#define SETUPROWS(none) \
	MOVQ rows+40(FP), AX       \
	MOVQ AX, 128(SP)           \
	MOVQ w_base+8(FP), AX      \
	MOVQ AX, 136(SP)           \
	MOVQ out_base+152(FP), AX  \
	MOVQ AX, 144(SP)           \
	MOVQ acc_base+120(FP), AX  \
	MOVQ AX, 152(SP)           \
	VPCMPEQW Y15, Y15, Y15     \
	VPSRLW $15, Y15, Y15       \
	MOVL $0x0f0f0f0f, AX       \
	VMOVD AX, X14              \
	VPBROADCASTD X14, Y14      \
	CMPQ 128(SP), $0           \
	JLE  none

// NEXTROW moves on to the next weight row.
#define NEXTROW(rowloop) \
	MOVQ wstride+32(FP), AX    \
	ADDQ AX, 136(SP)           \
	ADDQ $4, 144(SP)           \
	ADDQ $384, 152(SP)         \
	DECQ 128(SP)               \
	JNZ  rowloop

// PROD stores d_w·sc[8b..8b+7] (d_w the fp16 at w) to slot.
#define PROD(w, s, slot) \
	VPBROADCASTW w, X4           \
	VCVTPH2PS    X4, Y4          \
	VMULPS       s, Y4, Y4       \
	VMOVUPS      Y4, slot

// RINGPRO fills the ring with the products of the first min(4, CX) blocks
// (wb bytes per weight block) and sets R13, R14, R15, DX for the loop.
#define RINGPRO(wb, lbl, lp) \
	MOVQ  CX, R12              \
	CMPQ  R12, $4              \
	JLE   lbl                  \
	MOVQ  $4, R12              \
lbl:                           \
	MOVQ  SI, R14              \
	MOVQ  BX, R15              \
	LEAQ  0(SP), DX            \
lp:                            \
	PROD(0(R14), (R15), (DX))  \
	ADDQ  $wb, R14             \
	ADDQ  $32, R15             \
	ADDQ  $32, DX              \
	DECQ  R12                  \
	JNZ   lp                   \
	MOVQ  CX, R13              \
	SUBQ  $4, R13              \
	XORQ  DX, DX

// RINGNEXT stores the products of the block four ahead into the slot just
// read (AX), if there is one, and moves the ring on.
#define RINGNEXT(wb, lbl) \
	TESTQ R13, R13             \
	JLE   lbl                  \
	PROD(0(R14), (R15), (AX))  \
	ADDQ  $wb, R14             \
	ADDQ  $32, R15             \
lbl:                           \
	DECQ  R13                  \
	ADDQ  $32, DX              \
	ANDQ  $127, DX

// Q8ROW: acc += (d_w·d_a) · float(lanes of |w|·sign(a, w)), row r.
#define Q8ROW(r, acc) \
	VMOVDQU      (r*32)(DI), Y12 \
	VPSIGNB      Y6, Y12, Y12    \
	VPMADDUBSW   Y12, Y5, Y12    \
	VPMADDWD     Y15, Y12, Y12   \
	VCVTDQ2PS    Y12, Y12        \
	VBROADCASTSS (r*4)(AX), Y13  \
	VFMADD231PS  Y12, Y13, acc

// UROW: acc += (d_w·d_a) · float(lanes of u·a − bias·Σ₄a), row r.
#define UROW(r, acc) \
	VPMADDUBSW   (r*32)(DI), Y6, Y12 \
	VPMADDWD     Y15, Y12, Y12       \
	VPSUBD       (r*32)(R8), Y12, Y12 \
	VCVTDQ2PS    Y12, Y12            \
	VBROADCASTSS (r*4)(AX), Y13      \
	VFMADD231PS  Y12, Y13, acc

#define Q8ROWS \
	Q8ROW(0, Y0)  \
	Q8ROW(1, Y1)  \
	Q8ROW(2, Y2)  \
	Q8ROW(3, Y3)  \
	Q8ROW(4, Y7)  \
	Q8ROW(5, Y8)  \
	Q8ROW(6, Y9)  \
	Q8ROW(7, Y10)

#define UROWS \
	UROW(0, Y0)  \
	UROW(1, Y1)  \
	UROW(2, Y2)  \
	UROW(3, Y3)  \
	UROW(4, Y7)  \
	UROW(5, Y8)  \
	UROW(6, Y9)  \
	UROW(7, Y10)

// NIB32U: the 32 nibbles of the 16 bytes at q in Y6 (low nibbles first).
#define NIB32U(q) \
	VMOVDQU     q, X6          \
	VPSRLW      $4, X6, X5     \
	VINSERTI128 $1, X5, Y6, Y6 \
	VPAND       Y14, Y6, Y6

// HIBITSU: Y6 |= 16·bit for Q5_0's 32 high bits at h.
#define HIBITSU(h) \
	VPBROADCASTD h, Y5                      \
	VPSHUFB      t8rhibitShuf<>(SB), Y5, Y5 \
	VPOR         t8rhibitMask<>(SB), Y5, Y5 \
	VPCMPEQB     t8rallOnes<>(SB), Y5, Y5   \
	VPAND        t8rbytes10<>(SB), Y5, Y5   \
	VPOR         Y5, Y6, Y6

// func dotT8RQ8_0AVX2(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int)
TEXT ·dotT8RQ8_0AVX2(SB), NOSPLIT, $160-184
	SETUPROWS(q8none)

q8row:
	ARGST8R(q8fresh)
	TESTQ CX, CX
	JZ    q8done
	RINGPRO(34, q8pro, q8prol)

	PCALIGN $64

q8loop:
	VMOVDQU 2(SI), Y6
	VPSIGNB Y6, Y6, Y5
	LEAQ    0(SP)(DX*1), AX
	Q8ROWS
	RINGNEXT(34, q8next)
	ADDQ $34, SI
	ADDQ $256, DI
	DECQ CX
	JNZ  q8loop

q8done:
	FINISHT8R(q8save, q8end)
	NEXTROW(q8row)

q8none:
	VZEROUPPER
	RET

// func dotT8RQ4_0AVX2(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int)
TEXT ·dotT8RQ4_0AVX2(SB), NOSPLIT, $160-184
	SETUPROWS(q4none)

q4row:
	ARGST8R(q4fresh)
	TESTQ CX, CX
	JZ    q4done
	RINGPRO(18, q4pro, q4prol)

	PCALIGN $64

q4loop:
	NIB32U(2(SI))
	LEAQ    0(SP)(DX*1), AX
	UROWS
	RINGNEXT(18, q4next)
	ADDQ $18, SI
	ADDQ $256, DI
	ADDQ $256, R8
	DECQ CX
	JNZ  q4loop

q4done:
	FINISHT8R(q4save, q4end)
	NEXTROW(q4row)

q4none:
	VZEROUPPER
	RET

// func dotT8RQ5_0AVX2(n int, w []byte, wstride, rows int, aq, corr []byte, sc []float32, acc []float32, flags int, out []float32, ostride int)
TEXT ·dotT8RQ5_0AVX2(SB), NOSPLIT, $160-184
	SETUPROWS(q5none)

q5row:
	ARGST8R(q5fresh)
	TESTQ CX, CX
	JZ    q5done
	RINGPRO(22, q5pro, q5prol)

	PCALIGN $64

q5loop:
	NIB32U(6(SI))
	HIBITSU(2(SI))
	LEAQ    0(SP)(DX*1), AX
	UROWS
	RINGNEXT(22, q5next)
	ADDQ $22, SI
	ADDQ $256, DI
	ADDQ $256, R8
	DECQ CX
	JNZ  q5loop

q5done:
	FINISHT8R(q5save, q5end)
	NEXTROW(q5row)

q5none:
	VZEROUPPER
	RET

// func repackQ8_0AVX2(nb int, a []byte, stride int, aq, corr []byte, bias int)
// Lays out eight Q8_0 rows (row r at a[r·stride:]) for the kernels above:
// aq[256b + 32r] the 32 quants of block b of row r; when len(corr) > 0,
// corr[256b + 32r] the int32 lanes bias·Σ₄a (bias = 8 or 16; lane k sums
// quants 4k..4k+3).
TEXT ·repackQ8_0AVX2(SB), NOSPLIT, $0-96
	MOVQ nb+0(FP), CX
	MOVQ a_base+8(FP), SI
	MOVQ stride+32(FP), R8
	MOVQ aq_base+40(FP), DI
	MOVQ corr_base+64(FP), R9
	MOVQ corr_len+72(FP), R10
	MOVQ bias+88(FP), AX
	VMOVD AX, X15
	VPBROADCASTW X15, Y15        // int16 bias
	MOVL $0x01010101, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14        // bytes 1
	TESTQ CX, CX
	JZ    rpdone

rpblock:
	MOVQ SI, R11
	MOVQ $8, DX
rprow:
	VMOVDQU 2(R11), Y0
	VMOVDQU Y0, (DI)
	TESTQ   R10, R10
	JZ      rpnocorr
	VPMADDUBSW Y0, Y14, Y1
	VPMADDWD   Y15, Y1, Y1
	VMOVDQU    Y1, (R9)
	ADDQ       $32, R9
rpnocorr:
	ADDQ $32, DI
	ADDQ R8, R11
	DECQ DX
	JNZ  rprow
	ADDQ $34, SI
	DECQ CX
	JNZ  rpblock

rpdone:
	VZEROUPPER
	RET

DATA t8rhibitShuf<>+0(SB)/8, $0x0000000000000000
DATA t8rhibitShuf<>+8(SB)/8, $0x0101010101010101
DATA t8rhibitShuf<>+16(SB)/8, $0x0202020202020202
DATA t8rhibitShuf<>+24(SB)/8, $0x0303030303030303
GLOBL t8rhibitShuf<>(SB), RODATA|NOPTR, $32
DATA t8rhibitMask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA t8rhibitMask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA t8rhibitMask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA t8rhibitMask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL t8rhibitMask<>(SB), RODATA|NOPTR, $32
DATA t8rallOnes<>+0(SB)/8, $-1
DATA t8rallOnes<>+8(SB)/8, $-1
DATA t8rallOnes<>+16(SB)/8, $-1
DATA t8rallOnes<>+24(SB)/8, $-1
GLOBL t8rallOnes<>(SB), RODATA|NOPTR, $32
DATA t8rbytes10<>+0(SB)/8, $0x1010101010101010
DATA t8rbytes10<>+8(SB)/8, $0x1010101010101010
DATA t8rbytes10<>+16(SB)/8, $0x1010101010101010
DATA t8rbytes10<>+24(SB)/8, $0x1010101010101010
GLOBL t8rbytes10<>(SB), RODATA|NOPTR, $32
