# lualock developer tasks. `make help` lists the targets.
#
# Adding a target: write it anywhere below with a "## description" comment on
# the target line (that is what `make help` prints) and add its name to
# .PHONY unless it produces a file of that name.

SHELL := /bin/bash
.DEFAULT_GOAL := help

GO          ?= go
# -p 1: one test package at a time. Each integration suite under tests/ is
# a package with its own servers, and several of its tests bound latencies
# in milliseconds: two suites at once on a 2-core machine would make them
# measure each other's load. The suites one at a time took 539 s where the
# former single tests/ package took 588 s, run back to back on the same
# loaded 2-core machine.
GOTESTFLAGS ?= -race -count=1 -timeout 20m -p 1
PKGS        ?= ./...
LUAGEN      := $(GO) run ./cmd/luagen
# staticcheck at the version pinned by the tool line in tools/go.mod (a module
# of its own, so its dependencies stay out of lualock's go.mod). `go tool -n`
# builds it once into the build cache and prints its path.
STATICCHECK  = $$(cd tools && $(GO) tool -n staticcheck)

# Tracked and new (not ignored) Go files that exist on disk, for gofmt.
GOFILES = $(wildcard $(shell git ls-files --cached --others --exclude-standard -- '*.go' 2>/dev/null))

.PHONY: help test test-short generate check redis

help: ## list targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "} {printf "  %-12s %s\n", $$1, $$2}'

# Modules of this repository besides the root one that `test` and `check`
# cover (bench/ has its own smoke test in .ci/run and is only checked).
EXTRA_MODULES := extra/lualockotel

# go test shows a passing package's output only with -v, so the harness's
# loud skip message would go unseen: say it here, once, after the run.
NOREDIS_NOTE := make: redis-server is not on PATH: the integration tests against real Redis were SKIPPED (tests/, gen, cmd/lualock). Install it (Debian/Ubuntu: apt-get install redis-server), or set LUALOCK_REQUIRE_REDIS=1 to make this a failure.

# run_tests runs go test with flags $(1) on the root module and on
# EXTRA_MODULES, then prints NOREDIS_NOTE when redis-server is missing.
define run_tests
	@status=0; \
	echo "$(GO) test $(1) $(PKGS)"; $(GO) test $(1) $(PKGS) || status=$$?; \
	for m in $(EXTRA_MODULES); do \
		echo "cd $$m && $(GO) test $(1) ./..."; (cd $$m && $(GO) test $(1) ./...) || status=$$?; \
	done; \
	command -v redis-server >/dev/null 2>&1 || echo "$(NOREDIS_NOTE)" >&2; \
	exit $$status
endef

test: ## run all tests with the race detector, at full size (6-13 min on 2 cores, with load; integration tests need redis-server)
	$(call run_tests,$(GOTESTFLAGS))

# The quick loop: -short runs the scale tests at smaller sizes, and as most
# integration tests wait (leases, budgets, timers) rather than compute, 8 of
# the parallel ones run at a time instead of GOMAXPROCS (2 on a 2-core box).
SHORTFLAGS ?= -short -parallel 8

test-short: ## the quick loop (~2.5-3.5 min on 2 cores): every test with -race, scale tests at smaller sizes, 8 in parallel
	$(call run_tests,$(GOTESTFLAGS) $(SHORTFLAGS))

generate: ## regenerate the Go code for the Lua scripts
	$(LUAGEN) generate

check: ## generated code up to date, Lua lint, gofmt, go vet, staticcheck (every module), no path or issue reference outside the repository
	$(LUAGEN) check
	$(LUAGEN) lint
	$(GO) test -count=1 -run 'TestRepository_standsAlone' ./docs/
	@files="$$(gofmt -l $(GOFILES) </dev/null)"; \
	if [ -n "$$files" ]; then \
		echo "gofmt -l: these files need gofmt -w:"; echo "$$files"; exit 1; \
	fi
	@for m in . bench $(EXTRA_MODULES); do echo "cd $$m && $(GO) vet ./..."; (cd $$m && $(GO) vet ./...) || exit 1; done
	@sc="$(STATICCHECK)" && for m in . bench $(EXTRA_MODULES); do \
		echo "cd $$m && staticcheck ./..."; (cd $$m && $$sc ./...) || exit 1; \
	done

# make redis [REDIS_PORT=N]: a throwaway standalone redis-server (no
# persistence, loopback only, temp dir) in the foreground; Ctrl-C stops it.
redis: ## run a throwaway redis-server on a free loopback port (foreground)
	@command -v redis-server >/dev/null || { echo "redis-server not on PATH" >&2; exit 1; }; \
	port="$(REDIS_PORT)"; \
	if [ -z "$$port" ]; then \
		for _ in $$(seq 50); do \
			p=$$(( RANDOM % 20000 + 20000 )); \
			if ! (exec 3<>/dev/tcp/127.0.0.1/$$p) 2>/dev/null; then port=$$p; break; fi; \
		done; \
	fi; \
	if [ -z "$$port" ] || [ "$$port" = 6379 ]; then echo "no usable port (6379 is never used)" >&2; exit 1; fi; \
	dir=$$(mktemp -d -t lualock-redis-manual-XXXXXX); trap 'rm -rf "$$dir"' EXIT; \
	echo ">>> redis-server on 127.0.0.1:$$port (dir $$dir); connect: redis-cli -p $$port; Ctrl-C to stop"; \
	redis-server --port "$$port" --bind 127.0.0.1 --protected-mode no --save "" --appendonly no \
		--dir "$$dir" --daemonize no

.PHONY: bench
bench: ## side-by-side benchmark vs redislock, redsync, rueidislock (~10 min); rewrites bench/REPORT.md, results.json and run.json
	cd bench && $(GO) run . -rounds 3
