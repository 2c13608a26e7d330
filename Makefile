# The payment guard. `make` lists the targets.
GO        ?= go
PKGS      := ./...
FUZZTIME  ?= 30s
BENCHTIME ?= 10s

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {n[++k] = $$1; d[k] = $$2; if (length($$1) > w) w = length($$1)} \
		END {f = "  %-" w "s  %s\n"; for (i = 1; i <= k; i++) printf f, n[i], d[i]}' $(MAKEFILE_LIST)

# run starts the built binary, not `go run`: go run exits 1 when
# interrupted, which make reports as "Error 1" after a clean Ctrl-C. When
# make is the terminal's foreground job, the server runs as a job of its
# own (set -m), so that Ctrl-C reaches the server alone: it stops
# gracefully, exits 0, and make ends with that status instead of dying of
# the signal too. Otherwise the shell gives way to the server (exec), so
# that no shell interrupted beside it turns its clean stop into an error.
# Every serve setting passes through as a GUARD_ variable, from the
# environment or make's command line: make run GUARD_ADDR=127.0.0.1:9090
.PHONY: run
run: ## run the service on 127.0.0.1:8080 (GUARD_ADDR=host:port to change) with a practice owner, agent and key (data in ./data)
	@mkdir -p bin
	$(GO) build -o bin/guard ./cmd/guard
	@if [ -t 0 ] && set -- $$(ps -o tpgid= -o pgid= -p $$$$ 2>/dev/null) && [ $$# -eq 2 ] && [ "$$1" = "$$2" ]; then \
		set -m; bin/guard serve -dev; \
	else \
		exec bin/guard serve -dev; \
	fi

.PHONY: build
build: ## build bin/guard and bin/guard-bench
	$(GO) build -o bin/guard ./cmd/guard
	$(GO) build -o bin/guard-bench ./bench/cmd/guard-bench

.PHONY: test
test: browser-deps ## every test, under the race detector, with short fuzzing of each fuzz target
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	$(MAKE) fuzz FUZZTIME=3s

# The console's browser tests need axe-core from npm and Debian's chromium
# (apt-get install chromium); without them, and without CI set, they skip.
BROWSERTEST := transport/console/browsertest

.PHONY: browser-deps
browser-deps: ## install what the console's browser tests inject (axe-core, npm ci)
	@if [ ! -f $(BROWSERTEST)/node_modules/axe-core/axe.min.js ] && command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $(BROWSERTEST) --no-audit --no-fund --loglevel=error || echo "npm ci failed: the browser tests will skip"; \
	fi

# A run that ends with "context deadline exceeded" and wrote no failing
# input is the fuzzing engine missing its own deadline under CPU pressure
# (golang/go#51484), not a finding: every finding writes its input under
# testdata/fuzz. Anything else that fails is shown and fails the target.
.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 30s)
	@set -e; out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	$(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read pkg dir; do \
		for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			if ! $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >$$out 2>&1; then \
				if grep -q 'context deadline exceeded' $$out && ! grep -q 'Failing input written' $$out; then \
					echo "  the engine overran its deadline and found nothing (golang/go#51484); not a failure"; \
				else \
					cat $$out; exit 1; \
				fi; \
			fi; \
		done; \
	done

.PHONY: bench
bench: ## load the service over HTTP on loopback and print spends/s and latency
	$(GO) run ./bench/cmd/guard-bench $(BENCHFLAGS)

# staticcheck is pinned so that a new release cannot turn a green tree red.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: lint
lint: ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
