#!/usr/bin/env bash
# vsllama.sh: apr's CUDA engine and llama.cpp-CUDA side by side on one GPU
# machine, on the same files (issue 12's acceptance figures). Run from the
# repository root after `make llama-bundle LLAMA_REPO=DIR` put apr, and
# llama.cpp's sources at the commit our fixtures came from, under .dev/
# (carry .dev; ~17 MB with the tree's 12). It
#   1. builds llama.cpp (CUDA, sm_90; llama-bench and llama-completion) while
#      apr synth writes qwen2.5-0.5b and qwen3.5-0.8b at Q4_K, Q8_0 and F16;
#   2. with the CPU quiet: apr bench --backend cuda (pp512, tg128, 5 reps,
#      --stream) and llama-bench -ngl 99 -r 5 on each file; tg128 at depth
#      4096 on the Q4_K files; time to first token on a 518-token prompt
#      (apr three times with F2's reference computed, in turns with
#      llama.cpp, then twice with it cached; the median of each);
#   3. writes one summary.txt to ${OUT:-/tmp/apr-vs}: the rows of both tools
#      and, per test, apr's median over llama.cpp's mean.
# Each step runs under a time limit; steps past LIM seconds (default 570)
# are skipped and say so.
set -u
out="${OUT:-/tmp/apr-vs}"
mkdir -p "$out"
S="$out/summary.txt"
LIM=${LIM:-570}
ok() { [ $SECONDS -lt $LIM ] || { echo "skipped at $SECONDS s: $*" >>"$S"; return 1; }; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$S" 2>&1
xz -dc .dev/apr.xz >/tmp/apr && chmod +x /tmp/apr || { echo "no .dev/apr.xz" >>"$S"; exit 3; }
# LLAMA_DIR (default /tmp/llama): where llama.cpp is unpacked and built. A
# directory an earlier call on the same machine left there is built on (a
# no-op when complete): a call too short for the build can leave it to the
# next one.
LD=${LLAMA_DIR:-/tmp/llama}
(
	if [ ! -e "$LD/b/CMakeCache.txt" ]; then
		gen=
		command -v ninja >/dev/null && gen="-G Ninja"
		# shellcheck disable=SC2086 # gen is words
		mkdir -p "$LD" && tar -C "$LD" -xJf .dev/llama-src.tar.xz &&
			cmake -S "$LD" -B "$LD/b" $gen -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
				-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
				-DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >/tmp/llama-cfg.txt 2>&1
	fi &&
		cmake --build "$LD/b" -j "$(nproc)" --target llama-bench llama-completion >/tmp/llama-build.txt 2>&1
	echo "llama.cpp build exit $? at $SECONDS s"
) >/tmp/llama-stat.txt 2>&1 &
build=$!
models="q25-Q4_K q25-Q8_0 q25-F16 q35-Q4_K q35-Q8_0 q35-F16"
for m in $models; do
	case $m in q25-*) a="qwen2 qwen2.5-0.5b" ;; *) a="qwen35 qwen3.5-0.8b" ;; esac
	set -- $a
	/tmp/apr synth --arch "$1" --preset "$2" --type "${m#*-}" -o "/tmp/$m.gguf" -q >/dev/null 2>&1 &
done
for p in $(jobs -p); do [ "$p" = "$build" ] || wait "$p"; done
echo "synth done at $SECONDS s" >>"$S"
while kill -0 $build 2>/dev/null && [ $SECONDS -lt $((LIM - 200)) ]; do sleep 2; done
cat /tmp/llama-stat.txt >>"$S"
LB=$LD/b/bin/llama-bench
LC=$LD/b/bin/llama-completion
[ -x $LB ] || { echo "llama.cpp did not build:" >>"$S"; tail -n 20 /tmp/llama-cfg.txt /tmp/llama-build.txt >>"$S" 2>&1; }

# apr: "| cuda | auto | TEST | median | min | max | [ci] |" rows; llama-bench: markdown rows.
: >/tmp/rows.txt
for m in $models; do
	ok "apr $m" || break
	timeout 90 /tmp/apr bench /tmp/$m.gguf --backend cuda -p 512 -n 128 --reps 5 --stream 2>&1 |
		grep -E '^\| cuda|GB/s|refused|rror' | sed "s/^/apr $m /" >>/tmp/rows.txt
done
for m in q25-Q4_K q35-Q4_K; do
	ok "apr $m d4096" || break
	timeout 60 /tmp/apr bench /tmp/$m.gguf --backend cuda -p 0 -n 128 -d 4096 --reps 5 2>&1 | grep -E '^\| cuda|refused|rror' | sed "s/^/apr $m /" >>/tmp/rows.txt
done
# .dev/apr-base.xz (make cuda-bundle CUDA_BUNDLE_BASE=REV), when carried: an
# earlier apr with its own embedded kernels, on the prompt tests, for a
# before/after on the same machine ("base" rows; the ratios are apr's).
if [ -s .dev/apr-base.xz ] && xz -dc .dev/apr-base.xz >/tmp/apr-base && chmod +x /tmp/apr-base; then
	for m in $models; do
		ok "apr-base $m" || break
		env -u APR_CUDA_PTX timeout 90 /tmp/apr-base bench /tmp/$m.gguf --backend cuda -p 512 -n 128 --reps 5 2>&1 |
			grep -E '^\| cuda|refused|rror' | sed "s/^/base $m /" >>/tmp/rows.txt
	done
fi
if [ -x $LB ]; then
	for m in $models; do
		ok "llama $m" || break
		timeout 90 $LB -m /tmp/$m.gguf -ngl 99 -r 5 -p 512 -n 128 -o md 2>/dev/null | grep -E '^\| [a-z]' | grep -v '^| model' | sed "s/^/llama $m /" >>/tmp/rows.txt
	done
	for m in q25-Q4_K q35-Q4_K; do
		ok "llama $m d4096" || break
		timeout 90 $LB -m /tmp/$m.gguf -ngl 99 -r 5 -p 0 -n 128 -d 4096 -o md 2>/dev/null | grep -E '^\| [a-z]' | grep -v '^| model' | sed "s/^/llama $m /" >>/tmp/rows.txt
	done
fi
cat /tmp/rows.txt >>"$S"
# Ratios: apr's median over llama.cpp's mean, per model and test.
echo "== apr / llama.cpp" >>"$S"
awk -F'|' '
	$1 ~ /^apr / && NF > 6 { split($1, k, " "); t = $4; gsub(/ /, "", t); v = $5; gsub(/[ ,]/, "", v); apr[k[2] " " t] = v }
	$1 ~ /^llama / && NF > 6 { split($1, k, " "); t = $(NF-2); gsub(/^ +| +$/, "", t); sub(/ @ /, "@", t); v = $(NF-1); sub(/±.*/, "", v); gsub(/ /, "", v); ll[k[2] " " t] = v }
	END { for (key in apr) if (key in ll) printf "%-24s apr %10.1f  llama.cpp %10.1f  %.2fx\n", key, apr[key], ll[key], apr[key] / ll[key] }
' /tmp/rows.txt | sort >>"$S"

# Time to first token: process wall time, then each tool's own stages. Per
# model: one llama.cpp run to warm the file and the driver, then three rounds
# of apr with an empty F2 cache (the reference's answer computed) and
# llama.cpp in turns, then apr twice more with the answer cached; the median
# of each.
prompt="$(for i in $(seq 12); do printf 'the quick brown fox jumps over the lazy dog and then it runs far away '; done)"
apr_ttft() { # model label cache-dir [flags: --no-f2]
	local t0 t1 r
	t0=$(date +%s%N)
	# shellcheck disable=SC2086 # the flags are words
	XDG_CACHE_HOME=$3 timeout 60 /tmp/apr run /tmp/$1.gguf -p "$prompt" --raw -n 1 --backend cuda --json --log-level info ${4:-} >/tmp/run.json 2>/tmp/run.err
	r=$?
	t1=$(date +%s%N)
	echo "ttft apr $1 $2 exit $r wall $(((t1 - t0) / 1000000)) ms: $(grep -oE '"(prompt_tokens|load_ms|h2d_ms|f2_ms|prefill_ms|wall_ms)": *[0-9.]+' /tmp/run.json | tr -d '"' | tr '\n' ' ') $(grep -oE '(reference_early_ms|reference_cached)=[0-9.a-z]+' /tmp/run.err | tr '\n' ' ')" >>"$S"
	[ $r -eq 0 ] || grep -m2 -iE 'refused|error' /tmp/run.err | cut -c1-200 >>"$S"
}
llama_ttft() { # model label
	local t0 t1 r
	[ -x $LC ] || return 0
	t0=$(date +%s%N)
	timeout 60 $LC -m /tmp/$1.gguf -ngl 99 -p "$prompt" -n 1 -no-cnv --temp 0 </dev/null >/tmp/lc.out 2>/tmp/lc.err
	r=$?
	t1=$(date +%s%N)
	echo "ttft llama.cpp $1 $2 exit $r wall $(((t1 - t0) / 1000000)) ms: $(grep -E 'load time|prompt eval time' /tmp/lc.err | sed 's/.*print: *//' | tr -s ' ' | tr '\n' ';')" >>"$S"
}
for m in q25-Q4_K q35-Q4_K; do
	ok "ttft $m" || break
	llama_ttft $m warm-up
	for i in 1 2 3; do
		apr_ttft $m uncached /tmp/f2cache-$m-$i
		llama_ttft $m run
	done
	for i in 1 2; do apr_ttft $m cached /tmp/f2cache-$m-1; done
	for i in 1 2; do apr_ttft $m f2-off /tmp/f2cache-$m-off --no-f2; done
done
echo "== time to first token, median process wall (ms)" >>"$S"
grep -E '^ttft (apr [^ ]+ (uncached|cached|f2-off)|llama.cpp [^ ]+ run) exit 0' "$S" |
	awk '{ k = $2 " " $3 " " $4; v[k] = v[k] " " $8 } END { for (k in v) print k, v[k] }' |
	while read -r tool model kind vals; do
		printf '%-10s %-10s %-9s median %s ms of %s\n' "$tool" "$model" "$kind" \
			"$(printf '%s\n' $vals | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')" "$(echo $vals | wc -w)" >>"$S"
	done
echo "total $SECONDS s" >>"$S"
