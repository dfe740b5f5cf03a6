#!/usr/bin/env bash
# Builds engine/cuda/kernels.fatbin (committed and embedded) and
# engine/cuda/kernels.ptx (the same PTX as text, for reading and for
# APR_CUDA_PTX; git-ignored) from the sources beside this script with nvcc
# (the `make kernels` target; needs the CUDA toolkit). kernels.fatbin.sum,
# and the first line of kernels.ptx, record the sources' sha256 as
# engine/cuda.SourcesSHA256 computes it: for each kernels/*.cu and *.cuh in
# name order, its name, a newline and its bytes. The fatbin holds sm_90
# machine code (loaded without the driver's PTX compilation, which costs a
# few hundred milliseconds per process) and the same PTX for other devices.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../kernels.ptx}"
fat="$(dirname "$out")/kernels.fatbin"
if ! command -v nvcc >/dev/null 2>&1; then
	echo "make kernels: refused: nvcc (the CUDA toolkit) is not on PATH; build the kernels on a CUDA machine" >&2
	exit 3
fi
sum="$(cd "$here" && for f in $(ls *.cu *.cuh | LC_ALL=C sort); do printf '%s\n' "$f"; cat "$f"; done | sha256sum | cut -d' ' -f1)"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
# The two compilations run side by side (each is one nvcc process).
nvcc -ptx -arch=sm_90 -O3 -fmad=false -o "$tmp" "$here/apr.cu" &
ptx=$!
nvcc -fatbin -gencode arch=compute_90,code='[sm_90,compute_90]' -O3 -fmad=false -o "$fat" "$here/apr.cu" &
fb=$!
# Both are waited for before a failure exits, so that neither is left running.
rc=0
wait $ptx || rc=$?
wait $fb || rc=$?
[ $rc -eq 0 ] || exit $rc
{ printf '// apr-kernels sources-sha256 %s\n' "$sum"; cat "$tmp"; } >"$out"
printf 'apr-kernels sources-sha256 %s\n' "$sum" >"$fat.sum"
echo "wrote $out, $fat (sources $sum)" >&2
