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
# luagen is a module of its own (cmd/luagen); lualock's go.mod names it with
# a tool line (and a replace to the folder), so `go tool luagen` builds it.
LUAGEN      := $(GO) tool luagen
# staticcheck at the version pinned by the tool line in tools/go.mod (a module
# of its own, so its dependencies stay out of lualock's go.mod). `go tool -n`
# builds it once into the build cache and prints its path.
STATICCHECK  = $$(cd tools && $(GO) tool -n staticcheck)

# Tracked and new (not ignored) Go files that exist on disk, for gofmt.
GOFILES = $(wildcard $(shell git ls-files --cached --others --exclude-standard -- '*.go' 2>/dev/null))

.PHONY: help test test-short test-quick load test-floor generate check redis

help: ## list targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "} {printf "  %-12s %s\n", $$1, $$2}'

# Modules of this repository besides the root one that `test` and `check`
# cover (bench/ has its own smoke test in .ci/run and is only checked):
# luart (the runtime of generated code), cmd/luagen (the generator),
# extra/lualockotel and extra/lualockrueidis.
EXTRA_MODULES := luart cmd/luagen extra/lualockotel extra/lualockrueidis
# tests/failover runs on its own, its tests side by side: each has
# deployments of its own and spends its time waiting for failovers (the
# Sentinels' down-after, elections, rejoins), so 4 at a time instead of
# GOMAXPROCS take about the longest test's time rather than the sum.
FAILOVER_PARALLEL ?= 4

# go test shows a passing package's output only with -v, so the harness's
# loud skip message would go unseen: say it here, once, after the run.
NOREDIS_NOTE := make: redis-server is not on PATH: the integration tests against real Redis were SKIPPED (tests/, gen, cmd/lualock). Install it (Debian/Ubuntu: apt-get install redis-server), or set LUALOCK_REQUIRE_REDIS=1 to make this a failure.

# Likewise for the Redisson interop suite (tests/interop), which skips when
# LUALOCK_REDISSON_JARS names no jar, names a missing one, or javac is not
# on PATH. docs/TESTING.md says where the jars come from.
NOREDISSON_NOTE := make: the Redisson interop suite (tests/interop) was SKIPPED: it needs a JDK and the Redisson jars named in LUALOCK_REDISSON_JARS (docs/TESTING.md says where to get them), or set LUALOCK_REQUIRE_REDISSON=1 to make this a failure.

# run_tests runs go test with flags $(1) on the root module and on
# EXTRA_MODULES, then prints NOREDIS_NOTE when redis-server is missing and
# NOREDISSON_NOTE when the interop suite had no jars or no JDK.
define run_tests
	@status=0; \
	pkgs=$$($(GO) list $(PKGS)) || exit 1; \
	slow=$$(echo "$$pkgs" | grep '/tests/failover$$' || true); \
	rest=$$(echo "$$pkgs" | grep -v '/tests/failover$$' || true); \
	echo "$(GO) test $(1) $(PKGS)$${slow:+ (but tests/failover)}"; $(GO) test $(1) $$rest || status=$$?; \
	if [ -n "$$slow" ]; then \
		echo "$(GO) test -parallel $(FAILOVER_PARALLEL) $(1) $$slow"; \
		$(GO) test -parallel $(FAILOVER_PARALLEL) $(1) $$slow || status=$$?; \
	fi; \
	for m in $(EXTRA_MODULES); do \
		echo "cd $$m && $(GO) test $(1) ./..."; (cd $$m && $(GO) test $(1) ./...) || status=$$?; \
	done; \
	command -v redis-server >/dev/null 2>&1 || echo "$(NOREDIS_NOTE)" >&2; \
	jars_ok=$$(command -v javac >/dev/null 2>&1 && echo 1); \
	[ -n "$$LUALOCK_REDISSON_JARS" ] || jars_ok=; \
	IFS=: read -ra jars <<< "$$LUALOCK_REDISSON_JARS"; \
	for j in "$${jars[@]}"; do [ -z "$$j" ] || [ -e "$$j" ] || jars_ok=; done; \
	[ -n "$$jars_ok" ] || echo "$(NOREDISSON_NOTE)" >&2; \
	exit $$status
endef

test: ## run all tests with the race detector, at full size (about 21 min on an idle 2-core machine; integration tests need redis-server)
	$(call run_tests,$(GOTESTFLAGS))

# The quick loop: -short runs the scale tests at smaller sizes, and as most
# integration tests wait (leases, budgets, timers) rather than compute, 8 of
# the parallel ones run at a time instead of GOMAXPROCS (2 on a 2-core box).
#
# Measured: `time make test-short`, warm build cache, on the project's 2-core
# machine shared with other sessions (load average 10-19): 419 s wall, 69 s
# of CPU. The suites mostly wait, one package at a time (-p 1): tests/sem
# 79 s, tests/reentrant 55 s, tests/faults 42 s, tests/family 37 s. Packages
# side by side (-p 4) took 234 s, but that run failed a dozen tests whose
# bounds in milliseconds did not yet widen with the load (a constant slack
# instead of backends.Canary): -p 1 stays until none is left.
SHORTFLAGS ?= -short -parallel 8

test-short: ## the quick loop (7 min on 2 cores shared with other work; the Makefile says how measured): every test with -race, scale tests at smaller sizes, 8 in parallel
	$(call run_tests,$(GOTESTFLAGS) $(SHORTFLAGS))

# The unit loop: the packages that start no deployment of their own beyond
# one standalone redis-server (the root package, generated/, internal/,
# luart, cmd/luagen): what an edit to the runtime, the tracker or the
# generator breaks first, in about a minute. Measured: `time make
# test-quick`, warm build cache, 57 s wall (10 s of CPU: the tests wait
# on leases and timers) on the 2-core machine with two busy loops and a
# `make test-short` running beside it. The suites under
# tests/, cmd/lualock and docs are in test-short and test.
QUICKPKGS := . ./generated/... ./internal/...
QUICKMODULES := luart cmd/luagen
test-quick: ## the unit loop (about a minute): root, generated, internal, luart and luagen tests with -race -short; suites are in test-short
	@status=0; \
	echo "$(GO) test $(GOTESTFLAGS) -short $(QUICKPKGS)"; $(GO) test $(GOTESTFLAGS) -short $(QUICKPKGS) || status=$$?; \
	for m in $(QUICKMODULES); do \
		echo "cd $$m && $(GO) test $(GOTESTFLAGS) -short ./..."; (cd $$m && $(GO) test $(GOTESTFLAGS) -short ./...) || status=$$?; \
	done; \
	command -v redis-server >/dev/null 2>&1 || echo "$(NOREDIS_NOTE)" >&2; \
	exit $$status
# make load [LOAD_RUNS=N] [LOAD_CMD='...']: LOAD_CMD (make test-short) up to
# LOAD_RUNS times in a row (1), stopping at the first failure, while two busy
# loops keep both cores of a 2-core machine loaded; the loops end with the
# runs, by their pids, and by themselves after LOAD_LIMIT seconds at most.
LOAD_RUNS  ?= 1
LOAD_LIMIT ?= 3600
LOAD_CMD   ?= $(MAKE) test-short
load: ## run LOAD_CMD (default make test-short) LOAD_RUNS times under two busy loops (scripts/load.sh)
	scripts/load.sh -l 2 -r $(LOAD_RUNS) -t $(LOAD_LIMIT) -- $(LOAD_CMD)

# The floor of luart, the runtime of generated code: the oldest go-redis v9
# (luart/go.mod) and Go (its go directive) it supports, with that Go
# toolchain (downloaded by the go command: GOTOOLCHAIN). FLOOR_TOOLCHAIN=local
# uses the installed one.
FLOOR_TOOLCHAIN ?= go1.18.10
GOREDIS_CURRENT  = $$(sed -n 's/^[[:space:]]*github.com\/redis\/go-redis\/v9 \(v[^ ]*\).*/\1/p' go.mod)

test-floor: ## luart at its floor (go-redis v9.0.0, Go 1.18) and at lualock's go-redis; a consumer module at the floor and at lualock's versions
	cd luart && GOTOOLCHAIN=$(FLOOR_TOOLCHAIN) $(GO) test -count=1 ./...
	cd cmd/luagen && LUAGEN_FLOOR_TOOLCHAIN=$(FLOOR_TOOLCHAIN) $(GO) test -count=1 -run '^TestConsumerFloor$$' ./gen
	@tmp=$$(mktemp -d) && cp luart/go.mod luart/go.sum "$$tmp/" && v=$(GOREDIS_CURRENT) && \
	echo "cd luart && go test with go-redis $$v (a copy of go.mod: -modfile)" && \
	(cd luart && $(GO) get -modfile="$$tmp/go.mod" github.com/redis/go-redis/v9@$$v && \
		$(GO) test -race -count=1 -modfile="$$tmp/go.mod" ./...); status=$$?; rm -rf "$$tmp"; exit $$status

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
