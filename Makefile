# The commands of the project. `make test` is what CI runs.

GO      ?= go
INTEROP := examples/interop

.PHONY: test check test-root interop bench fuzz demo

## test: format and vet checks, then every test of both modules with -race
test: check test-root interop

## check: gofmt and go vet, in the library module and the interop module
check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd $(INTEROP) && $(GO) vet ./...

test-root:
	$(GO) test -race -count=1 ./...

## interop: the tests against go-ethereum, alone
interop:
	cd $(INTEROP) && $(GO) test -race -count=1 ./...

## bench: the benchmarks, with allocation counts
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## fuzz: each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	@for pkg in ./hexutil ./backend .; do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "$$pkg $$target"; $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## demo: regenerate the demo chain that examples/server embeds
demo:
	cd $(INTEROP) && $(GO) run ./cmd/demochain -out ../server/demo
