#!/usr/bin/env bash
# gpu.sh: everything the CUDA engine needs checked on a GPU machine (nvcc and
# a driver, no Go). Run from the repository root after `make cuda-bundle`
# put the cross-compiled binaries and the fixtures under .dev/. The device
# tool carries at most 64 MiB a call, so it runs in two phases:
#
#   gpu.sh tests  (carry .dev/cuda.test.xz .dev/fixtures.tar.xz)
#     1. make kernels (nvcc) → $OUT/kernels.fatbin and kernels.fatbin.sum,
#        recording the sources' sha256 (copy them to engine/cuda/ and commit
#        them), and $OUT/kernels.ptx, the same PTX as text (not committed)
#     2. engine/cuda's tests on the device: every format bit-exact, the
#        products, parity and greedy on every fixture model, the planted
#        defect named by the bisect and failed by F2
#   gpu.sh apps   (carry .dev/apr.xz .dev/kernels.fatbin .dev/stories260K.gguf)
#     3. apr devices; apr run twice (the second F2 from its cache) and apr qa
#        --backend cuda on stories260K
#     4. apr qa --backend cuda on qwen2.5-0.5b and qwen3.5-0.8b at Q8_0 and
#        Q4_K, and with a planted wrong kernel (must fail)
#     5. apr bench --backend cuda (pp512, tg128, 5 reps, the device's stream
#        read) on apr synth's qwen2.5-0.5b and qwen3.5-0.8b at Q4_K, Q8_0
#        and F16 (issue 12's table); tg128 at depth 4096 (Q4_K, both
#        shapes); time to first token on a ~512-token prompt; Q4_K with the
#        graph cache and fusion off; pp512 with APR_CUDA_MQ=0 and without
#     6. Nsight Compute's per-kernel times of decode and pp512, and one decode
#        product in detail, where the machine has ncu (APR_GPU_NCU=0: not run,
#        for a call short of time)
#
#   gpu.sh table  (carry .dev/apr.xz; the kernels of an earlier `tests` in the
#                 same $OUT, else .dev/kernels.fatbin) step 5 alone: issue
#                 12's table, for a call short of time
#   gpu.sh all    both in one call, when what they carry fits in 64 MiB
#                 (make cuda-bundle CUDA_BUNDLE_EXCLUDE='*-F32.gguf *-F16.gguf')
#   gpu.sh mv     (carries nothing) kernels/bench/mvbench.cu built as the
#                 sources are and with -DMV_ACT=0, each run: the one-token
#                 products' µs per launch inside CUDA graphs against a
#                 streaming read of the same bytes (mvbench-base.txt,
#                 mvbench-noact.txt)
#   gpu.sh ab     (carry .dev/apr.xz) an A/B of kernel variants: the sources
#                 as they are ("base") and each of APR_GPU_AB's nvcc -D flag
#                 sets (';' between variants: APR_GPU_AB='-DMM_INT=0;-DMV_V4=0'),
#                 built side by side, or the word committed: the tree's
#                 engine/cuda/kernels.fatbin, the kernels as committed (an
#                 A/B of changed sources against HEAD's: APR_GPU_AB=committed),
#                 or the word apr-base: the apr of .dev/apr-base.xz (make
#                 cuda-bundle CUDA_BUNDLE_BASE=REV: apr built at an earlier
#                 revision) with its own embedded kernels (an A/B of host
#                 changes: APR_GPU_AB='committed;apr-base');
#                 apr bench (APR_GPU_AB_TESTS, '-p 512 -n 128'; '|' between
#                 sets of tests: '-p 512 -n 128|-p 0 -n 64 -d 4096';
#                 APR_GPU_AB_REPS, 5) of each in turns on apr synth's
#                 APR_GPU_AB_MODELS ('q25-Q4_K q35-Q4_K': q25/q35-TYPE) for
#                 APR_GPU_AB_ROUNDS (2) rounds; a line per model, variant and
#                 round in the summary. The apr carried must know the
#                 kernels' names (a fatbin without one it loads is refused).
#                 Every variant's fatbin (build.sh's gencode) comes back in
#                 variants.tar.xz: make a winner's flags the sources'
#                 defaults and its fatbin is theirs (record their sum).
#
# Every step runs even when an earlier one failed, under its own time limit;
# the exit code is the first failure's (the planted step inverts: it must
# fail). With APR_GPU_DEADLINE=S no step runs past S seconds (a device call
# of 600 s: APR_GPU_DEADLINE=570 gpu.sh all); what did not fit is named as
# skipped and exits 4 when nothing failed. The summary, the kernels and logs.tar.xz (the full log and the
# profiles) go to ${OUT:-/tmp/apr-gpu}: five files, because the device tool
# returns only a few (a run of 23 lost the kernels).
set -u
phase="${1:-}"
out="${OUT:-/tmp/apr-gpu}"
mkdir -p "$out"
rc=0
# APR_GPU_DEADLINE=S (the device call's own limit, less a margin): no step
# runs past S seconds from the start. A step is cut to the time left, and
# one that cannot start with 15 s left is skipped and named; a run with
# skipped steps exits 4 when nothing failed (skipped is not passed).
deadline=${APR_GPU_DEADLINE:-0}
skipped=0
# step LIMIT CMD...: run CMD under `timeout LIMIT`, log it, keep the first failure.
step() {
	local lim=$1
	shift
	if [ "$deadline" -gt 0 ]; then
		local left=$((deadline - SECONDS))
		if [ $left -lt 15 ]; then
			echo "== skipped (APR_GPU_DEADLINE=$deadline): $*" | tee -a "$out/summary.txt"
			skipped=$((skipped + 1))
			return 124
		fi
		[ "$lim" -le $left ] || lim=$left
	fi
	local t0=$SECONDS
	echo "== $*" | tee -a "$out/summary.txt"
	timeout "$lim" "$@" >"$out/step.txt" 2>&1
	local s=$?
	cat "$out/step.txt" >>"$out/log.txt"
	tail -25 "$out/step.txt"
	echo "   exit $s in $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
	[ $rc -ne 0 ] || rc=$s
	return $s
}
emu=
if [ -n "${APR_LIBCUDA:-}" ] && ! command -v nvcc >/dev/null; then
	emu=1 # a dry run against the host emulator (no nvcc, no GPU)
fi
unxz() { xz -dc ".dev/$1.xz" >"/tmp/$1" && chmod +x "/tmp/$1"; }

tests() {
	if [ -n "$emu" ]; then
		echo "// emulator: not read" >"$out/kernels.ptx"
		cp "$out/kernels.ptx" "$out/kernels.fatbin"
	else
		step 300 bash engine/cuda/kernels/build.sh "$out/kernels.ptx" || {
			[ $rc -ne 0 ] || rc=4
			exit $rc
		}
	fi
	export APR_CUDA_PTX="$out/kernels.ptx"
	# The sum in the summary too: the device tool may return only some of
	# $OUT's files (a call of 2026-12-07 lost kernels.fatbin.sum), and the
	# fatbin cannot be committed without it.
	[ -s "$out/kernels.fatbin.sum" ] && tee -a "$out/summary.txt" <"$out/kernels.fatbin.sum"
	if command -v cuobjdump >/dev/null && [ -s "$out/kernels.fatbin" ] && [ -z "$emu" ]; then
		# registers, shared memory and spills of the hot kernels
		cuobjdump -res-usage "$out/kernels.fatbin" 2>&1 | grep -A1 -E 'Function (mv_|mm_)(Q4_K|Q5_0|Q8_0|F16)|Function k_att' | grep -v '^--' >>"$out/summary.txt"
	fi
	root="$(pwd)"
	mkdir -p /tmp/apr-shared && tar -C /tmp/apr-shared -xJf .dev/fixtures.tar.xz
	[ -e "$(dirname "$root")/shared/fixtures" ] || ln -sfn /tmp/apr-shared/shared "$(dirname "$root")/shared"
	unxz cuda.test
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem --format=csv >>"$out/summary.txt" 2>&1
	# The device tests: testdata/device-tests.txt's, less those for the
	# emulator only (TestEmulated reads the same list).
	tests="$(awk '!/^#/ && NF && (NF == 1 || $2 == "gpu") {print $1}' engine/cuda/testdata/device-tests.txt | paste -sd'|')"
	[ -n "$tests" ] || { echo "no device tests in engine/cuda/testdata/device-tests.txt: nothing would run" | tee -a "$out/summary.txt"; rc=1; return 1; }
	(cd engine/cuda && step 200 /tmp/cuda.test -test.v -test.run "^($tests)\$")
	# The prompt products on mm_<type> (APR_CUDA_MQ=0) as well.
	(cd engine/cuda && APR_CUDA_MQ=0 step 60 /tmp/cuda.test -test.v -test.run '^(TestProducts|TestWideProducts)$')
	export APR_CUDA_PTX="$out/kernels.fatbin"
	(cd engine/cuda && step 120 /tmp/cuda.test -test.v -test.run '^(TestParity|TestGraphReplay)$')
}

# qa_steps: apr qa --backend cuda on the 0.5b and 0.8b shapes (qwen3.5's
# Q8_0 failed gpu_cpu on 2026-12-06: on apr synth's weights the cpu engine
# that the gate holds cuda to drifts past the tier, from noise its layers
# amplify; cuda agreed with the reference), and a planted wrong
# kernel that F2 must fail (skipped with APR_GPU_NO_QA=1 in a speed round).
qa_steps() {
	step 150 /tmp/apr qa /tmp/q25-Q8_0.gguf --backend cuda
	step 150 /tmp/apr qa /tmp/q25-Q4_K.gguf --backend cuda
	step 150 /tmp/apr qa /tmp/q35-Q4_K.gguf --backend cuda
	step 150 /tmp/apr qa /tmp/q35-Q8_0.gguf --backend cuda
	# The planted wrong kernel must fail the engine gates (exit 1): a pass
	# here is the failure. It must lie beyond the model's own noise, which
	# on apr synth's random-weight 0.5B is large: through the host emulator
	# (2026-12-07) gpu_cpu on qwen2.5-0.5b Q4_K measured 1 − min cosine
	# 2.1e-4 clean against a noise floor (the reference against its jittered
	# twin) of 3.4e-4; blk.3.ffn_down's column 7 × 1.5 moved it to 2.7e-4
	# and × 3 to 8.6e-4, both within 2× the floor (pass), × 6 to 4.0e-3
	# (fail). The step names which gates catch it.
	before=$rc
	APR_CUDA_PLANT=blk.3.ffn_down.weight:7:6 step 150 /tmp/apr qa /tmp/q25-Q4_K.gguf --backend cuda --gate f2,parity,gpu_cpu,golden_output
	s=$?
	rc=$before
	if [ $s -ne 1 ]; then
		echo "   the planted defect was not failed (exit $s, want 1)" | tee -a "$out/summary.txt"
		[ $rc -ne 0 ] || rc=1
	fi
}

# use_built_kernels: the kernels an earlier `tests` built in the same
# $OUT, else .dev/kernels.fatbin (apps and table).
use_built_kernels() {
	if [ -s "$out/kernels.fatbin" ]; then
		export APR_CUDA_PTX="$out/kernels.fatbin"
	else
		export APR_CUDA_PTX="$(pwd)/.dev/kernels.fatbin"
	fi
}

apps() {
	use_built_kernels
	unxz apr
	st=.dev/stories260K.gguf
	[ -e "$st" ] || st=/tmp/apr-shared/shared/fixtures/models/stories260K.gguf # after tests, in `all`
	step 30 /tmp/apr devices
	step 30 /tmp/apr devices --json
	step 60 /tmp/apr run "$st" -p "Once upon a time" --raw -n 32 --backend cuda --json
	step 60 /tmp/apr run "$st" -p "Once upon a time" --raw -n 32 --backend cuda --json
	step 120 /tmp/apr qa "$st" --backend cpu,cuda
	if [ -n "$emu" ]; then
		echo "== emulator dry run: the qwen2.5-0.5b steps need a GPU" | tee -a "$out/summary.txt"
		return
	fi
	synth
	# The release gate first: under a deadline it is what must not be skipped.
	[ -n "${APR_GPU_NO_QA:-}" ] || qa_steps
	# The prompt products on the float tensor cores (mm_<type>) against the
	# int8 ones (mq_<type>, the default), in turns.
	for m in q25-Q4_K q35-Q4_K q25-Q8_0; do
		APR_CUDA_MQ=0 step 60 /tmp/apr bench /tmp/$m.gguf --backend cuda -p 512 -n 0 --reps 5
		step 60 /tmp/apr bench /tmp/$m.gguf --backend cuda -p 512 -n 0 --reps 5
	done
	APR_CUDA_PROFILE=1 step 60 /tmp/apr bench /tmp/q25-Q4_K.gguf --backend cuda -p 0 -n 32 --reps 1 --warmup 0
	table
	APR_CUDA_GRAPHS=0 APR_CUDA_FUSE=0 step 90 /tmp/apr bench /tmp/q25-Q4_K.gguf --backend cuda -p 0 -n 128 --reps 3
	ncu_steps
}

# synth [FILE...]: apr synth's files of issue 12's shapes under /tmp, each
# q25-TYPE (qwen2.5-0.5b) or q35-TYPE (qwen3.5-0.8b); by default both at
# Q4_K, Q8_0 and F16. A name of neither shape is refused (exit 2, nothing
# made); the files are written side by side and waited for (with any other
# background job of the caller: ab's nvcc builds).
synth() {
	local m seen=" "
	for m in ${@:-q25-Q4_K q25-Q8_0 q25-F16 q35-Q4_K q35-Q8_0 q35-F16}; do
		case $m in
		q25-* | q35-*) ;;
		*)
			echo "gpu.sh: model $m is not q25-TYPE or q35-TYPE" | tee -a "$out/summary.txt"
			return 2
			;;
		esac
	done
	for m in ${@:-q25-Q4_K q25-Q8_0 q25-F16 q35-Q4_K q35-Q8_0 q35-F16}; do
		[ ! -s "/tmp/$m.gguf" ] && [ "${seen#* $m }" = "$seen" ] || continue # made, or asked for twice
		seen="$seen$m "
		case $m in
		q25-*) /tmp/apr synth --arch qwen2 --preset qwen2.5-0.5b --type "${m#*-}" -o "/tmp/$m.gguf" >/dev/null 2>&1 & ;;
		q35-*) /tmp/apr synth --arch qwen35 --preset qwen3.5-0.8b --type "${m#*-}" -o "/tmp/$m.gguf" >/dev/null 2>&1 & ;;
		esac
	done
	wait
}

# table (gpu.sh table, and part of apps): issue 12's table — pp512 and
# tg128 on both shapes at Q4_K, Q8_0 and F16 with the stream read, tg128
# at depth 4096, time to first token with F2 on (computed, then cached)
# and off — and a decode step's device time against its host time.
# APR_GPU_TABLE and APR_GPU_TABLE_DEPTH name the files of the first two
# (q25/q35-TYPE; defaults: all six, and the two Q4_K), for a call short of
# time.
table() {
	# A decode step's device time against its host time (recording, graph
	# launches, the logits' copy): what the host adds to each token.
	APR_CUDA_PROFILE=steps step 60 /tmp/apr bench /tmp/q25-Q4_K.gguf --backend cuda -p 0 -n 128 --reps 2
	for m in ${APR_GPU_TABLE-q25-Q4_K q25-Q8_0 q25-F16 q35-Q4_K q35-Q8_0 q35-F16}; do
		step 90 /tmp/apr bench /tmp/$m.gguf --backend cuda -p 512 -n 128 --reps 5 --stream --json
	done
	for m in ${APR_GPU_TABLE_DEPTH-q25-Q4_K q35-Q4_K}; do
		step 120 /tmp/apr bench /tmp/$m.gguf --backend cuda -p 0 -n 128 -d 4096 --reps 5
	done
	# Time to first token on a ~512-token prompt: twice (the second run's
	# F2 answers from its cache), then with F2 off; the stages are separate
	# fields.
	prompt="$(for i in $(seq 12); do printf 'the quick brown fox jumps over the lazy dog and then it runs far away '; done)"
	for i in 1 2; do
		step 60 /tmp/apr run /tmp/q25-Q4_K.gguf -p "$prompt" --raw -n 1 --backend cuda --json
	done
	step 60 /tmp/apr run /tmp/q25-Q4_K.gguf -p "$prompt" --raw -n 1 --backend cuda --json --no-f2 # what F2 costs
}

ncu_steps() {
	# Each kernel's device time inside the replayed decode graphs (Nsight
	# Compute, clocks left alone), when the machine has it.
	ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
	[ "${APR_GPU_NCU:-1}" != 0 ] || ncu= # APR_GPU_NCU=0: no Nsight Compute runs (a call short of time)
	if [ -n "$ncu" ] && [ "$deadline" -gt 0 ] && [ $((deadline - SECONDS)) -lt 310 ]; then
		echo "== skipped (APR_GPU_DEADLINE=$deadline): Nsight Compute (310 s)" | tee -a "$out/summary.txt"
		skipped=$((skipped + 1))
		ncu=
	fi
	if [ -n "$ncu" ]; then
		timeout 100 "$ncu" --clock-control none --csv --metrics gpu__time_duration.sum --launch-skip 600 --launch-count 320 \
			/tmp/apr bench /tmp/q25-Q4_K.gguf --backend cuda -p 0 -n 12 --reps 1 --warmup 0 >"$out/ncu.csv" 2>"$out/ncu.err"
		echo "== ncu: exit $? ($(wc -l <"$out/ncu.csv") lines in ncu.csv)" | tee -a "$out/summary.txt"
		timeout 60 "$ncu" --clock-control none --csv --metrics gpu__time_duration.sum --launch-count 400 \
			/tmp/apr bench /tmp/q25-Q4_K.gguf --backend cuda -p 512 -n 0 --reps 1 --warmup 0 >"$out/ncu-pp.csv" 2>>"$out/ncu.err"
		echo "== ncu (pp512): exit $? ($(wc -l <"$out/ncu-pp.csv") lines in ncu-pp.csv)" | tee -a "$out/summary.txt"
		# Decode at depth 4096: only the decode step's kernels (the products
		# and the row attention; the depth's fill runs mq, mm and k_flash).
		timeout 80 "$ncu" --clock-control none --csv --metrics gpu__time_duration.sum -k 'regex:^(mv_|k_att)' --launch-skip 200 --launch-count 240 \
			/tmp/apr bench /tmp/q25-Q4_K.gguf --backend cuda -p 0 -n 12 -d 4096 --reps 1 --warmup 0 >"$out/ncu-d4096.csv" 2>>"$out/ncu.err"
		echo "== ncu (decode at depth 4096): exit $? ($(wc -l <"$out/ncu-d4096.csv") lines in ncu-d4096.csv)" | tee -a "$out/summary.txt"
		# One decode product in detail (throughput, occupancy, stalls), for the next round.
		timeout 60 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
			-k regex:mv_Q5_0 --launch-skip 200 --launch-count 2 \
			/tmp/apr bench /tmp/q25-Q4_K.gguf --backend cuda -p 0 -n 12 --reps 1 --warmup 0 >"$out/ncu-mv.txt" 2>>"$out/ncu.err"
		echo "== ncu (mv detail): exit $?" | tee -a "$out/summary.txt"
	fi
}

# ab: the kernels as they are ("base") against variants of them, each a
# set of nvcc -D flags, all built side by side from the same sources, then
# apr bench of each in turns on the same files, so that a kernel change is
# measured against its own baseline on one host in one call.
ab() {
	local variants="${APR_GPU_AB:-}" models="${APR_GPU_AB_MODELS:-q25-Q4_K q35-Q4_K}"
	local rounds="${APR_GPU_AB_ROUNDS:-2}" reps="${APR_GPU_AB_REPS:-5}" tests="${APR_GPU_AB_TESTS:--p 512 -n 128}"
	if [ -z "$variants" ]; then
		echo "gpu.sh ab: APR_GPU_AB names no variant (nvcc -D flags, ';' between variants: APR_GPU_AB='-DMM_INT=0;-DMV_V4=0')" | tee -a "$out/summary.txt"
		rc=2
		return
	fi
	unxz apr
	case ";$variants;" in *";apr-base;"*) unxz apr-base || {
		echo "gpu.sh ab: the variant apr-base needs .dev/apr-base.xz (make cuda-bundle CUDA_BUNDLE_BASE=REV)" | tee -a "$out/summary.txt"
		rc=2
		return
	} ;;
	esac
	mkdir -p /tmp/ab
	local names=(base) flags=("") i=0
	IFS=';' read -ra vs <<<"$variants"
	for v in "${vs[@]}"; do
		i=$((i + 1))
		names+=("v$i")
		flags+=("$v")
	done
	for i in "${!names[@]}"; do
		echo "   ${names[$i]}: ${flags[$i]:-(the sources as they are)}" | tee -a "$out/summary.txt"
		rm -f "/tmp/ab/${names[$i]}.fatbin"
		if [ "${flags[$i]}" = apr-base ]; then
			: # no kernels to build: apr-base runs its own
		elif [ "${flags[$i]}" = committed ]; then
			# The kernels as committed (built from the sources at HEAD): the
			# baseline for changed sources ("base").
			cp engine/cuda/kernels.fatbin "/tmp/ab/${names[$i]}.fatbin"
		elif [ -n "$emu" ]; then
			echo "// emulator: not read" >"/tmp/ab/${names[$i]}.fatbin"
		else
			# Side by side (one nvcc process each), each with its own log.
			# shellcheck disable=SC2086 # the flags are words
			# build.sh's gencode, so that a winner's fatbin can be committed
			# once its flags are made the sources' defaults (the same code).
			timeout 300 nvcc -fatbin -gencode arch=compute_90,code='[sm_90,compute_90]' -O3 -fmad=false ${flags[$i]} \
				-o "/tmp/ab/${names[$i]}.fatbin" engine/cuda/kernels/apr.cu >"/tmp/ab/${names[$i]}.log" 2>&1 &
		fi
	done
	# The files, side by side with the builds (synth waits for both).
	# shellcheck disable=SC2086 # the models are words
	synth $models || {
		wait
		rc=2
		return
	}
	local built=() fatbins=() baseapr=
	for i in "${!names[@]}"; do
		n=${names[$i]}
		if [ "${flags[$i]}" = apr-base ]; then
			built+=("$n")
			baseapr=$n
		elif [ -s "/tmp/ab/$n.fatbin" ]; then
			fatbins+=("$n.fatbin")
			built+=("$n")
		else
			echo "== $n did not build:" | tee -a "$out/summary.txt"
			tail -5 "/tmp/ab/$n.log" 2>/dev/null | tee -a "$out/summary.txt"
			[ $rc -ne 0 ] || rc=1
		fi
	done
	# The variants' fatbins come back (one archive: the device tool returns
	# only a few files), each named as in the summary's "vN: flags" lines.
	[ ${#fatbins[@]} -eq 0 ] || (cd /tmp/ab && tar -cf - "${fatbins[@]}" | xz -T0 -6 >"$out/variants.tar.xz")
	if [ -n "$emu" ]; then
		echo "== emulator dry run: the benchmarks need a GPU (built: ${built[*]})" | tee -a "$out/summary.txt"
		return
	fi
	local sets
	IFS='|' read -ra sets <<<"$tests"
	for r in $(seq "$rounds"); do
		for t in "${sets[@]}"; do
			for m in $models; do
				for n in "${built[@]}"; do
					# apr-base runs its own embedded kernels (an empty
					# APR_CUDA_PTX is unset to apr); the others apr with theirs.
					local exe=/tmp/apr ptx="/tmp/ab/$n.fatbin"
					[ "$n" != "$baseapr" ] || exe=/tmp/apr-base ptx=
					# shellcheck disable=SC2086 # the tests are words
					APR_CUDA_PTX="$ptx" step 90 "$exe" bench "/tmp/$m.gguf" --backend cuda $t --reps "$reps" &&
						grep -E '^\| cuda' "$out/step.txt" | sed "s/^/$m $n round $r /" >>"$out/summary.txt"
				done
			done
		done
	done
}

# mvbench (gpu.sh mv): kernels/bench/mvbench.cu (the one-token products inside CUDA graphs
# on the decode step's shapes, for every threads-per-row, rows-per-slot and
# block cap, beside a streaming read of the same bytes; then a layer's
# products in sequence), built from the sources as they are and with
# -DMV_ACT=0 (x not rounded: not ggml numerics, for timing only) side by
# side, so that a product's fixed cost is split into its rounding and the
# rest. Needs nvcc only (no apr).
mvbench() {
	for v in base noact; do
		f=
		[ $v = base ] || f=-DMV_ACT=0
		# shellcheck disable=SC2086 # the flags are words
		timeout 300 nvcc -O3 -fmad=false -arch=sm_90 $f -I engine/cuda/kernels -o /tmp/mvbench-$v \
			engine/cuda/kernels/bench/mvbench.cu >/tmp/mvbench-$v.log 2>&1 &
	done
	wait
	for v in base noact; do
		if [ -x /tmp/mvbench-$v ]; then
			step 150 /tmp/mvbench-$v && cp "$out/step.txt" "$out/mvbench-$v.txt"
		else
			echo "== mvbench $v did not build:" | tee -a "$out/summary.txt"
			tail -5 /tmp/mvbench-$v.log | tee -a "$out/summary.txt"
			[ $rc -ne 0 ] || rc=1
		fi
	done
}

case "$phase" in
tests) tests ;;
mv) mvbench ;;
apps) apps ;;
table)
	use_built_kernels
	unxz apr
	# shellcheck disable=SC2086 # the lists are words
	synth q25-Q4_K ${APR_GPU_TABLE-q25-Q8_0 q25-F16 q35-Q4_K q35-Q8_0 q35-F16} ${APR_GPU_TABLE_DEPTH-q35-Q4_K}
	table
	;;
ab) ab ;;
all)
	tests
	apps
	;;
*)
	echo "usage: gpu.sh tests|apps|all|table|ab|mv" >&2
	exit 2
	;;
esac
rm -f "$out/step.txt"
echo "== first failure's exit code: $rc" | tee -a "$out/summary.txt"
if [ $skipped -gt 0 ]; then
	echo "== $skipped steps skipped for the deadline: not passed" | tee -a "$out/summary.txt"
	[ $rc -ne 0 ] || rc=4
fi
# The device tool brings back only a few files from $OUT: the full log and
# the profiles travel as one archive beside the summary and the kernels.
logs=$(cd "$out" && ls log.txt ncu* 2>/dev/null)
if [ -n "$logs" ]; then
	(cd "$out" && tar -cJf logs.tar.xz $logs && rm -f $logs)
fi
exit $rc
