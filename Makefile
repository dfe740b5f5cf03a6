# apr — see README.md. `make demo` builds apr and runs it on a model it writes
# itself; `make test` is what CI runs.

GO       ?= go
BIN      ?= bin/apr
REV      := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DIRTY    := $(shell test -n "$$(git status --porcelain 2>/dev/null)" && echo true || echo false)
PKG      := github.com/aprqa/apr/internal/buildinfo
LDFLAGS  := -X $(PKG).revision=$(REV) -X $(PKG).dirty=$(DIRTY)
FUZZTIME ?= 10m

.PHONY: all build demo test test-noasm fuzz bench clean kernels kernels-check cuda-bundle llama-bundle

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/apr

# The README's first command: build, write a tiny random-weight llama with
# apr synth, and gate it with apr qa (every gate, on every linked backend).
demo: build
	$(BIN) synth --arch llama --preset tiny -o tiny.gguf
	$(BIN) qa tiny.gguf

# The README's test command, and all that CI runs (.ci/run): vet, every test,
# and the kernel tests again with the pure-Go twins (-tags noasm).
test:
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -tags noasm ./engine/cpu/...

# Long fuzzing: every fuzz target for FUZZTIME each (make fuzz FUZZTIME=1h).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for fn in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$fn ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

# Benchmarks (not part of make test): dequantization, kernels, tokenizer, engines.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The CUDA kernels: engine/cuda/kernels/*.cu → engine/cuda/kernels.fatbin
# (sm_90 code and PTX) with nvcc, recording the sources' sha256 in
# kernels.fatbin.sum, and the PTX as text in kernels.ptx (not committed);
# refused (exit 3) without nvcc. Run it on a CUDA machine and commit
# kernels.fatbin and kernels.fatbin.sum.
kernels:
	bash engine/cuda/kernels/build.sh

# Type-check the kernels without the CUDA toolkit (clang's CUDA front end;
# writes nothing).
CLANG ?= clang
kernels-check:
	$(CLANG) -x cuda --cuda-gpu-arch=sm_90 --cuda-device-only -nocudainc -nocudalib \
		-Xclang -target-feature -Xclang +ptx80 -O2 -S -o /dev/null engine/cuda/kernels/apr.cu

# What a GPU machine without Go needs, under .dev/ (git-ignored): apr and
# engine/cuda's test binary cross-compiled with CGO_ENABLED=0, and every shared
# fixture model with the expected outputs the GPU tests read. engine/cuda/gpu.sh
# runs it there in two calls, because the device tool carries at most 64 MiB a
# call: `gpu.sh tests` (kernels, engine/cuda's tests on every fixture model;
# carries cuda.test.xz and fixtures.tar.xz) and `gpu.sh apps` (apr devices,
# run, qa and bench; carries apr.xz, the kernels the first call built and
# stories260K). CUDA_BUNDLE_EXCLUDE leaves out fixture models (patterns,
# space-separated) so that `gpu.sh all` fits one call: with
# '*-F32.gguf *-F16.gguf' (the F32 and F16 fixture models, ~25 MB that barely
# compress) the carry was 60 MB on 2026-12-06 (the tree 11.7, apr.xz 12.2,
# cuda.test.xz 9.6, fixtures.tar.xz 25.5 at xz -9e, stories260K 1.2), since
# the kernels' PTX text (9 MB) is neither committed nor embedded.
#
# CUDA_BUNDLE_BASE=REV also cross-compiles apr at revision REV (a commit,
# built in a temporary git worktree) into .dev/apr-base.xz, for `gpu.sh ab`'s
# variant apr-base: an A/B of host-side changes in turns on one GPU host
# (carry .dev/apr.xz and .dev/apr-base.xz, ~25 MB).
CUDA_BUNDLE_EXCLUDE ?= /none/
CUDA_BUNDLE_BASE ?=
cuda-bundle:
	mkdir -p .dev
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o .dev/apr ./cmd/apr
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) test -c -ldflags "-s -w" -o .dev/cuda.test ./engine/cuda
	xz -f -T2 .dev/apr .dev/cuda.test
	@if [ -n "$(CUDA_BUNDLE_BASE)" ]; then \
		set -e; wt=$$(mktemp -d); trap 'git worktree remove --force "$$wt" >/dev/null 2>&1; rm -rf "$$wt"' EXIT; \
		git worktree add --detach "$$wt" "$(CUDA_BUNDLE_BASE)" >/dev/null; \
		rev=$$(git -C "$$wt" rev-parse HEAD); \
		(cd "$$wt" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath \
			-ldflags "-s -w -X $(PKG).revision=$$rev -X $(PKG).dirty=false" \
			-o "$(CURDIR)/.dev/apr-base" ./cmd/apr); \
		xz -f -T2 .dev/apr-base; \
		echo "apr-base: apr at $$rev"; \
	fi
	tar -C .. $(foreach p,$(CUDA_BUNDLE_EXCLUDE),--exclude='$(p)') -cf - shared/fixtures/models shared/fixtures/expect shared/fixtures/dequant | xz -T2 -9e > .dev/fixtures.tar.xz
	cp ../shared/fixtures/models/stories260K.gguf .dev/
	@du -sh .dev/*

# What engine/cuda/vsllama.sh (apr and llama.cpp-CUDA side by side on a GPU
# machine) needs, under .dev/: apr cross-compiled, and llama.cpp's sources at
# LLAMA_COMMIT (the commit our fixtures came from) from LLAMA_REPO, a git
# directory holding it (a clone or a fetched mirror; never vendored), less
# its docs, models, tests and web UI: ~4 MB. Carry .dev and run
# `bash engine/cuda/vsllama.sh` there.
LLAMA_REPO ?=
LLAMA_COMMIT ?= 81ff7abe
llama-bundle:
	@test -n "$(LLAMA_REPO)" || { echo "make llama-bundle: refused: name LLAMA_REPO=DIR, a git directory holding llama.cpp $(LLAMA_COMMIT)" >&2; exit 3; }
	mkdir -p .dev
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o .dev/apr ./cmd/apr
	xz -f -T2 .dev/apr
	git -C "$(LLAMA_REPO)" archive --format=tar $(LLAMA_COMMIT) -- ggml src common include cmake vendor tools CMakeLists.txt LICENSE \
		':(exclude)tools/ui' ':(exclude)tools/server' | xz -T2 -6 > .dev/llama-src.tar.xz
	@du -sh .dev/apr.xz .dev/llama-src.tar.xz

clean:
	rm -rf bin tiny.gguf
