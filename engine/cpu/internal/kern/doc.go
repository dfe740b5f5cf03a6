// Package kern holds the quantized matrix kernels of apr's optimized CPU
// engine: dot products computed directly on ggml's quantized blocks (never
// by expanding weights to float32), the activation quantizers that feed
// them, a registry of kernels keyed by (op, weight type, backend,
// instruction set), and a worker pool that spreads matrix products over
// threads.
//
// # Conventions
//
// A weight matrix is ggml's 2-D tensor: Rows rows of Cols values, each row a
// contiguous run of blocks (ne0 = Cols). Kernel.Mul computes dst = x·Wᵀ for
// m activation rows, dst row-major (m rows of Rows values), written in place.
// Every activation row is first converted to the type ggml pairs with the
// weight type (its vec_dot_type), then each output is an integer dot product
// per block scaled in float32, as ggml-cpu computes it. Convert then MulActs
// splits the two steps so that one converted input serves several weight
// matrices; MulActsMany runs several matrices in one dispatch over the pool.
//
// # Activation formats
//
//	weight type                                   activation  converter
//	F32                                           F32         ConvertF32 (exact)
//	F16                                           F16         ConvertF16 (nearest even, as F16C)
//	BF16                                          BF16        ConvertBF16 (nearest even)
//	Q4_0 Q5_0 Q8_0 IQ4_NL MXFP4 NVFP4 Q1_0 Q2_0   Q8_0        QuantizeQ8_0
//	Q4_1 Q5_1                                     Q8_1        QuantizeQ8_1
//	Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS               Q8_K        QuantizeQ8_K
//	IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S            Q8_K        QuantizeQ8_K
//	IQ1_S IQ1_M TQ1_0 TQ2_0                       Q8_K        QuantizeQ8_K
//
// NVFP4, Q1_0 and Q2_0 pair with Q8_0 in ggml-cpu's type traits (their
// vec_dot walks two or four Q8_0 blocks per weight block). QuantizeQ8_0 and
// QuantizeQ8_1 follow ggml-cpu's x86 quantize_row_q8_0/q8_1 (id = 127/amax,
// round half to even), the code llama.cpp runs on every AVX machine, not the
// portable _ref form (id = 1/d, roundf), which differs only at exact ties;
// QuantizeQ8_K is ggml's quantize_row_q8_K_ref, which ggml-cpu uses on x86
// too, and reproduces the shared fixture bit for bit.
//
// # Kernels
//
// Every weight type has a portable Go kernel (instruction set "go",
// dot_go.go and dot_iq.go): its doc comment states the block arithmetic it
// computes. On amd64 the assembly kernels ("avx2": AVX2 + FMA + F16C) are
// registered beside them:
//
//	avx2 matvec:            F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL MXFP4
//	                        Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS IQ2_XXS IQ2_XS
//	                        IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M TQ1_0 TQ2_0 NVFP4
//	                        Q1_0 Q2_0 (every weight type)
//	avx2 four-weight-row    F32 F16 BF16 Q8_0 Q4_0 Q5_0 IQ4_NL MXFP4
//	matvec (decode):        Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS
//	avx2 eight-activation-  Q8_0 Q4_0 Q5_0 (activation scales as float32,
//	row matmul:             transposed per group of eight rows)
//	avx2 four-row matmul:   F32 F16 BF16 Q8_0 Q4_0 Q5_0 IQ4_NL MXFP4
//	                        Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS (F32 F16 BF16
//	                        also eight-row)
//	single-row only:        Q4_1 Q5_1 and the i-quants but IQ4_*, TQ1_0, TQ2_0,
//	                        NVFP4, Q1_0, Q2_0: their matvec and matmul run the
//	                        single-row kernel for each row
//
// and, where the CPU has AVX-512 F/BW/VL with VNNI ("avx512vnni"), for
// Q8_0, Q4_0, Q5_0 and IQ4_NL four-weight-row matvec and (not IQ4_NL)
// eight-activation-row matmul kernels that take the integer block sums with
// VPDPBUSD on 256-bit registers, and for Q4_K, Q5_K and Q6_K
// eight-activation-row matmul kernels that keep the eight rows' int32 lanes
// in Y16..Y23 (32 registers) and add the scaled sub-block products with
// VPDPWSSD; the other kernels of these keys are the AVX2 ones. 512-bit
// registers are not used: each row's float part must stay one eight-lane fma
// chain (below), which leaves a 512-bit register two rows that need
// different scales and a shuffle per fma.
//
// Decode (Mul with m = 1) runs the four-weight-row kernels over the rows in
// groups of four, the single-row kernel on the rest: each activation block
// is loaded once for four rows, the four rows' fma chains overlap (the
// single-row kernel waits on its one chain), and a pointer r4Lead rows ahead
// prefetches the weight rows linearly (four interleaved row streams defeat
// the hardware prefetchers). Prefill (m > 1) tiles the product: each pool
// task takes a chunk of weight rows and walks the activation rows in tiles;
// with an eight-activation-row kernel each group of eight activation rows
// stays in L1 while the chunk's weight rows pass over it.
//
// Unlike gonum's internal/asm, where a build has either the assembly or the
// Go form, both are compiled into amd64 binaries: the instruction set is
// chosen at run time from the CPU's features (golang.org/x/sys/cpu), and a
// CPU without AVX2 must still run (on the "go" kernels, by name). Building
// with -tags noasm leaves only the Go kernels.
//
// # Registry
//
// Each key has a contract id, "kernel.<op>.<type>.cpu.<isa>", e.g.
// "kernel.matvec.Q4_K.cpu.avx2". Lookup of a key that is not registered, or
// whose instruction set this CPU lacks, is refused (refuse.New, by the key's
// contract id); it is never routed to a neighbouring kernel. Select picks the
// most specific runnable instruction set registered for (op, type) and says
// which in the returned Kernel's key. List is the listing behind
// `apr kernels`.
//
// # Order of float32 operations
//
// The AVX2 kernels of F32, F16, BF16 (tinyBLAS's order), Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, TQ1_0
// and TQ2_0 reproduce ggml-cpu's AVX2 vec_dot arithmetic for their type
// (scalar "a += b·c" taken as fused, as GCC contracts it): the same int32
// lane partition (lane k
// holds values 4k..4k+3 of every 32-value group, offsets and scales folded
// in per lane as ggml folds them), the same number of float accumulators and
// the same order of fma/add operations, and hsum_float_8 at the end. The
// multi-row kernels (four-row and eight-row matmul, four-weight-row matvec,
// and the avx512vnni ones) perform, for each row, exactly the single-row
// kernel's float32 operations; they may form the exact integer lane sums
// differently (unsigned weights minus bias·Σa, VPDPBUSD, scales picked from
// registers), which gives the same integers. So a matmul row is bit for bit
// the matvec of that activation row (TestMatMulRowsEqualMatVec), a matvec
// row is bit for bit that row alone (TestMatVecRowsEqualSingleRow), and
// avx512vnni gives what avx2 gives (TestAssemblyISAsAgreeBitForBit): prefill
// and decode agree, on every amd64 machine.
// The AVX2 kernels of the 1- to 3-bit i-quants, NVFP4, Q1_0 and Q2_0 compute
// the same integer sums in their own float order (ggml-cpu runs scalar code
// for NVFP4, Q1_0 and Q2_0 on x86). The Go kernels follow ggml's generic C
// order (what ggml runs without SIMD). llama.cpp's repacked Q4_0, IQ4_NL and
// Q4_K GEMMs (its CPU_REPACK buffers) sum in yet another order.
//
// # Contract
//
// For a row of n values in B weight blocks, a kernel's result differs from
// the float64 dot product of the dequantized weights and the dequantized
// converted activations by at most (B + 8)·2⁻²³·Σ|wᵢ·aᵢ|; for Q4_1 and Q5_1
// add Σ_blocks |m_w·s_a|·2⁻¹⁰ (Q8_1 stores s = d·Σq in half precision, from
// the unrounded d); for TQ1_0 and TQ2_0 add (B + 8)·2⁻²³·Σ_blocks
// |d_w·d_a|·2·Σ|q_a| (ggml's AVX2 order subtracts the Q8_K bsums from lanes
// that hold other values' products, so a lane can exceed its values' Σ|w·a|). Assembly and Go kernels differ only in the order of
// float32 additions, within the same bound; Mul with m > 1 gives each row
// exactly what Mul with m = 1 gives for it, on every instruction set.
package kern
