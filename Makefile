# apr — see README.md. `make demo` builds apr and runs it on a model it writes
# itself; `make test` is what CI runs.

GO       ?= go
BIN      ?= bin/apr
REV      := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DIRTY    := $(shell test -n "$$(git status --porcelain 2>/dev/null)" && echo true || echo false)
PKG      := github.com/aprqa/apr/internal/buildinfo
LDFLAGS  := -X $(PKG).revision=$(REV) -X $(PKG).dirty=$(DIRTY)
FUZZTIME ?= 10m

.PHONY: all build demo test test-noasm fuzz bench clean

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

clean:
	rm -rf bin tiny.gguf
