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
//	avx2 eight-activation-  Q8_0 Q4_0 Q5_0 Q4_K Q6_K on repacked activations
//	row matmul:             (tile8r, preferred); Q8_0 Q4_0 Q5_0 also on the
//	                        activations as they are (tile8)
//	avx2 four-row matmul:   F32 F16 BF16 Q8_0 Q4_0 Q5_0 IQ4_NL MXFP4
//	                        Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS (F32 F16 BF16
//	                        also eight-row)
//	avx2 float tiles:       F32 F16 BF16: four weight rows by twelve
//	                        activation rows, both expanded to float32
//	                        (tilef.go; prefill with m ≥ 8)
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
// registers are not used there: each row's float part must stay one
// eight-lane fma chain (below), which leaves a 512-bit register two rows that
// need different scales and a shuffle per fma. The float types need no
// scales, and where the CPU has AVX-512 F/BW/VL ("avx512") their prefill
// tile holds two activation rows' eight-lane chains in one 512-bit register
// (the weight values broadcast to both halves): F32, F16 and BF16 are
// registered there with the AVX2 kernels and that tile.
//
// Where the CPU has AVX-512 VNNI, Q8_0, Q5_0, Q4_K and Q6_K are also
// registered as packed kernels ("avx512vnni16", r16.go and r16k.go), which
// Select prefers: their
// weights are repacked once, at load (Kernel.Pack; the engine keeps the
// packed copy in place of the file's pages), sixteen rows per 512-bit
// register, and each (weight row, activation row) pair is one lane of one
// float32 chain over the blocks, acc = fma(float32(Σ_b w·a), float32(d_w·d_a),
// acc), the block's integer sum taken exactly by VPDPBUSD on u = w + 128
// minus 128·Σa (the K-quants: nibbles or bytes against the signed Q8_K
// quants, sub-block scales applied in int32, a few fmas per super-block).
// Per block and pair that is 1/16 of a conversion, a multiply and an fma,
// where ggml's order pays one of each per pair (below). These
// kernels are not in ggml's order: they are held to the contract's bound
// (kernel_dot, the property tests) and, bit for bit, to their Go twins
// (TestMulR16). The chain does not depend on m or on which rows share a
// call, so their matmul rows still equal their matvec rows bit for bit
// (batch invariance, which serving relies on). Packed, Q8_0 keeps its 34
// bytes per block and row and Q5_0 its 22 (unpacked in the kernel); Q4_K
// takes 2.8% more, Q6_K 30% more (one byte per value). The exact kernels
// stay registered (avx2, avx512vnni) and selectable by key.
//
// Where the CPU has AVX2 (+ FMA + F16C), the same four types are registered
// on the same packed weights as "avx2r16" (r16avx2_amd64.go, written by
// gen/r16avx2.py): the integer sums through VPMADDUBSW and VPMADDWD, eight
// rows per 256-bit register (Q8_0 with ggml's sign trick, the others on
// their unsigned quants with the offset taken from the activation sums),
// and the avx512vnni16 kernels' float32 chains, so their results are bit
// for bit those of avx512vnni16 and of the Go twins. Select ranks them
// below avx512vnni16 and above the unpacked AVX-512 kernels: they run on a
// CPU with AVX2 but no AVX-512 VNNI (Haswell to Zen 3, Skylake-X). SelectOn
// with AVX2ISAs chooses as such a CPU does, on any machine that has AVX2
// (the engine's kernel sets "avx2" and "avx2-exact", APR_CPU_KERNELS).
//
// Where the CPU has AVX-512 F/BW/VL, F32, F16 and BF16 are also registered
// as packed kernels ("avx512r16", r16f.go, written by gen/r16f.py), which
// Select prefers (the "exact" set keeps the float tiles below): the weights
// are repacked at load into groups of sixteen rows with value k of the
// sixteen rows side by side, and each (weight row, activation row) pair is
// one lane of one float32 fma chain over the values in order. Prefill holds
// 32 weight rows by up to 14 activation rows in 28 registers: per value two
// weight loads (F16 widened by VCVTPH2PS, BF16 by a shift), one broadcast per
// activation row and two fmas, no reduction (the lanes are the rows, stored
// into dst); decode is the same kernel on one row, so the chain does not
// depend on m (batch invariance). The engine then passes 512 tokens at a
// time (Backend.UBatch), as llama.cpp does. Their AVX2 twin ("avx2r16", 16
// rows in two 256-bit registers by up to 6 activation rows) gives the same
// bits on the same packing. On AVX512-BF16, BF16 is also
// registered as "avx512bf16" (VDPBF16PS on weights packed in pairs), ranked
// below avx512r16 because it measured slower here.
//
// The float tiles expand each pool task's weight rows to float32 once (a
// task's 16 rows, in L2) and the activation rows once per MulActsMany, in
// groups of twelve laid out two rows per 64 bytes; a group is taken in
// pieces of 64 steps of eight values (24 KiB, in L1) while the task's weight
// rows pass over it. The eight-row kernels they replace converted every
// activation value once per weight row (nine VCVTPH2PS per eight fmas).
//
// Prefill (m ≥ 8) on AVX2 repacks each group of eight activation rows once
// per MulActsMany (over the pool): Q8_0 rows as [block][row][32 quants]
// (every load aligned, one pointer for the eight rows) plus, for Q4_0 and
// Q5_0, the lanes bias·Σ₄a they subtract (these kernels take the weights
// unsigned, u = w + bias, and read a and the correction from memory: one
// instruction less per row and block than ggml's VPSIGNB form, the same
// int32 lanes as long as no activation quant is −128, which QuantizeQ8_0
// never yields from finite input); Q8_K rows as [super-block][row][256
// quants] with the bsums pair sums and the scales laid out two rows per
// register (Q4_K's min accumulators run two rows per register, lane for
// lane the single-row operations). A tile8r call runs a task's weight rows
// (up to 16) over one group, so that the group stays in L1 while they
// pass; rows longer than 16 KiB of repacked activations go in pieces, the
// accumulators carried between pieces in a per-worker buffer, with exactly
// the operations of one pass. The Q8_0-type kernels store each block's
// eight scale products d_w·d_a four blocks ahead (a product stored in the
// block that broadcasts it stalls on store-to-load forwarding). Their hot
// loops are 64-byte aligned (PCALIGN): unaligned, the Q8_0 loop's speed
// moved by ~20% from one build to the next on Zen 3.
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
// # Element-wise functions
//
// SiLU, SwiGLU, SoftMax/ExpSum and Sigmoid compute what ggml-cpu computes
// on AVX2+FMA, lane for lane (elem.go): ggml_v_expf / ggml_v_silu for whole
// groups of 8 (assembly on AVX2, with a Go twin whose float32 fma rounds
// once, as VFMADD does), ggml's scalar code with libm's expf past them, the
// softmax sum reduced per group as ggml's AVX2 code reduces it into a
// float64. ggml has no vector sigmoid; Sigmoid is its scalar form.
//
// DeltaRow (delta.go) is one row of the Gated DeltaNet delta rule (decay,
// dot with k, rank-1 update, dot with q) in eight float32 lanes without
// fused multiply-adds, the AVX2 form giving the Go twin's bits.
//
// The pool's helpers poll for the next loop for SpinWait before they park,
// and For polls for their completion: a futex wake-up cost more than a
// decode step's small products on the VMs this was measured on.
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
// multi-row kernels (four-row and eight-row matmul, the tile8r kernels,
// four-weight-row matvec, and the avx512vnni ones) perform, for each row,
// exactly the single-row
// kernel's float32 operations (so do the float tiles, avx2 and avx512,
// whose inputs are exact float32 expansions); they may form the exact integer lane sums
// differently (unsigned weights minus bias·Σa, VPDPBUSD, scales picked from
// registers), which gives the same integers (for the unsigned forms: as long
// as no activation quant is −128, which QuantizeQ8_0 does not produce from
// finite input; ggml's VPSIGNB wraps −128). So a matmul row is bit for bit
// the matvec of that activation row (TestMatMulRowsEqualMatVec), a matvec
// row is bit for bit that row alone (TestMatVecRowsEqualSingleRow), and
// avx512vnni gives what avx2 gives (TestAssemblyISAsAgreeBitForBit): prefill
// and decode agree, on every amd64 machine. The packed avx512vnni16 kernels
// keep the first two (their own chain, the same for every m) but not the
// third: they sum in another order than avx2.
// The AVX2 kernels of the 1- to 3-bit i-quants, NVFP4, Q1_0 and Q2_0 compute
// the same integer sums in their own float order (ggml-cpu runs scalar code
// for NVFP4, Q1_0 and Q2_0 on x86). The Go kernels follow ggml's generic C
// order (what ggml runs without SIMD). llama.cpp's repacked Q4_0, IQ4_NL and
// Q4_K GEMMs (its CPU_REPACK buffers) sum in yet another order.
//
// # What exactness costs
//
// The rule that every matmul row equals the single-row kernel's result bit
// for bit (ggml's AVX2 vec_dot arithmetic) fixes, for the 32-value block
// types, one int32→float32 conversion and one eight-lane fma per weight
// block and activation row. That is not a cost of the rule: it is ggml's
// own algorithm (a block's scales are fp16 per block, and llama.cpp's AVX2
// tinyBLAS GEMM for Q8_0 does the same conversion and fma per block pair).
// A kernel that skipped it would have to apply per-block scales in integer
// arithmetic (lossy) or change the float order (the differences request 1
// removed). On Zen 3 (AVX2, no VNNI) a block pair of Q8_0 costs VPSIGNB,
// VPMADDUBSW, VPMADDWD, VCVTDQ2PS, VFMADD plus two loads; measured alone in
// registers these run at ~1.7 cycles per pair, the mul/fma ports being the
// limit (VPMADDUBSW/VPMADDWD share two pipes with VPSIGNB and the FMA), and
// the full kernel at ~2.3: prefill at m = 512 reaches 55–70 GFLOP/s per
// core for Q8_0 and Q5_0 (noisy shared VM). The K-quants convert once per
// 256-value super-block (their sub-block scales are integers) and reach
// 75–95 (Q4_K) and 55–75 (Q6_K) GFLOP/s per core.
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
// exactly what Mul with m = 1 gives for it, on every instruction set (for
// activations converted by this package).
package kern
