#!/usr/bin/env bash
# gpu.sh: everything the CUDA engine needs checked on a GPU machine, in one
# call (the machine has nvcc and a driver but no Go). Run from the
# repository root after `make cuda-bundle` put the cross-compiled binaries
# and the fixtures under .dev/; results go to ${OUT:-/tmp/apr-gpu}:
#   1. make kernels (nvcc -ptx -arch=sm_90) → kernels.ptx, with the sources' sha256 (commit it)
#   2. apr devices
#   3. engine/cuda's tests on the device: every format bit-exact, the products, parity and
#      greedy on every fixture model, the planted defect named by the bisect and failed by F2
#   4. apr run / apr qa --backend cuda on stories260K and apr synth's qwen2.5-0.5b at Q8_0
#   5. apr bench --backend cuda (pp512, tg128) beside cpu on the same shape
# Every step runs even when an earlier one failed; the exit code is the first failure's.
set -u
out="${OUT:-/tmp/apr-gpu}"
mkdir -p "$out"
rc=0
step() { echo "== $*" | tee -a "$out/summary.txt"; "$@" 2>&1 | tee -a "$out/log.txt" | tail -40; local s=${PIPESTATUS[0]}; echo "   exit $s" | tee -a "$out/summary.txt"; [ $rc -ne 0 ] || rc=$s; }
root="$(pwd)"
if [ -n "${APR_LIBCUDA:-}" ] && ! command -v nvcc >/dev/null; then
	# A dry run of this script against the host emulator (no nvcc, no GPU).
	echo "// emulator: not read" >"$out/kernels.ptx"
else
	bash engine/cuda/kernels/build.sh "$out/kernels.ptx" 2>&1 | tee -a "$out/log.txt"
fi
export APR_CUDA_PTX="$out/kernels.ptx"
mkdir -p /tmp/apr-shared && tar -C /tmp/apr-shared -xJf .dev/fixtures.tar.xz
[ -e "$(dirname "$root")/shared/fixtures" ] || ln -sfn /tmp/apr-shared/shared "$(dirname "$root")/shared"
for b in apr cuda.test; do xz -dc ".dev/$b.xz" >"/tmp/$b" && chmod +x "/tmp/$b"; done
fx=/tmp/apr-shared/shared/fixtures
step /tmp/apr devices
(cd engine/cuda && step /tmp/cuda.test -test.v -test.run '^(TestKernelsPTXCurrent|TestGetRowsBitExact|TestProducts|TestParity|TestPlantedDefect)$')
step /tmp/apr run "$fx/models/stories260K.gguf" -p "Once upon a time" --raw -n 32 --backend cuda --json
step /tmp/apr qa "$fx/models/stories260K.gguf" --backend cpu,cuda
if [ -n "${APR_LIBCUDA:-}" ]; then
	echo "== emulator dry run: the qwen2.5-0.5b steps need a GPU; first failure's exit code: $rc" | tee -a "$out/summary.txt"
	exit $rc
fi
/tmp/apr synth --arch qwen2 --preset qwen2.5-0.5b --type Q8_0 -o /tmp/q25-Q8_0.gguf >/dev/null 2>&1
step /tmp/apr qa /tmp/q25-Q8_0.gguf --backend cuda
APR_CUDA_PLANT=blk.3.ffn_down.weight:7:1.5 step /tmp/apr qa /tmp/q25-Q8_0.gguf --backend cuda --gate f2
step /tmp/apr bench /tmp/q25-Q8_0.gguf --backend cuda --compare cpu --compare-reps 1 -p 512 -n 128 --reps 5 --threads 16
echo "== first failure's exit code: $rc" | tee -a "$out/summary.txt"
exit $rc
