#!/usr/bin/env bash
# emusweep.sh: apr qa --backend cuda on the host emulator (kernels/emu.cpp,
# no GPU) over apr synth's tiny model of every architecture at every weight
# type apr writes, the tree's kernels and host code: the CUDA engine's
# numerics and gates on shapes and types the fixtures do not hold. It proves
# nothing about speed or nvcc's code (a GPU run does); it found the mmid
# min-term defect on Q4_1/Q5_1 experts and golden_output's missing MoE
# rules (2026-12-07). Run from the repository root; ~25 min on 2 cores.
#   ARCHS, TYPES: what to sweep (defaults below); OUT: where the models,
#   each qa report and summary.txt go (default /tmp/apr-emusweep).
# Exit 0 when every model was written and passed, 1 otherwise (the failing
# gates, or the refusal to write a model, listed).
# The timing gate measures this machine: beside other heavy work it can
# fail on load alone (its report says which stage moved).
set -u
out="${OUT:-/tmp/apr-emusweep}"
mkdir -p "$out"
ARCHS="${ARCHS:-llama qwen2 qwen3 qwen3moe qwen35 qwen35moe}"
TYPES="${TYPES:-F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS TQ1_0 TQ2_0 MXFP4 NVFP4 Q1_0 Q2_0}"
go build -o "$out/apr" ./cmd/apr || exit 2
"${CXX:-c++}" -O2 -std=c++17 -shared -fPIC -o "$out/libcuda-emu.so" engine/cuda/kernels/emu.cpp || exit 2
echo "// the emulator runs the kernels compiled for the host; this image is not read" >"$out/emulator.ptx"
export APR_LIBCUDA="$out/libcuda-emu.so" APR_CUDA_PTX="$out/emulator.ptx"
S="$out/summary.txt"
: >"$S"
bad=0
for arch in $ARCHS; do
	for ty in $TYPES; do
		f="$out/$arch-$ty.gguf"
		if ! "$out/apr" synth --arch "$arch" --preset tiny --type "$ty" -o "$f" -q >"$f.synth" 2>&1; then
			echo "$arch $ty: NOT TESTED, synth refused: $(tail -1 "$f.synth")" | tee -a "$S"
			bad=1 # a model the sweep could not write is not a pass
			continue
		fi
		"$out/apr" qa "$f" --backend cuda >"$f.qa" 2>&1
		rc=$?
		echo "$arch $ty: exit $rc: $(grep -E '^qa: [0-9]+ passed' "$f.qa")" | tee -a "$S"
		if [ $rc -ne 0 ]; then
			bad=1
			grep -E '^  [0-9]+ .* (fail|refused) ' "$f.qa" | tee -a "$S"
		fi
	done
done
exit $bad
