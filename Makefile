# Shoal — make targets. `make demo` and `make test` are the two a newcomer needs.
GO       ?= go
BIN      := bin/shoal
PKGS     := ./...
# Race-enabled test run; the whole suite takes 10-25 minutes on 2 cores from an empty build cache, depending on the host.
TESTFLAGS ?= -race -count=1 -timeout 25m

.PHONY: all build demo test test-short vet fmt proto clean

all: build

# The version shoal reports (shoal version, shoal_build_info): the nearest tag and commit.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS  := -X github.com/shoaldb/shoal/version.Version=$(VERSION)

build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/shoal

# A local three-node cluster on loopback with data under ./shoal-data; Ctrl-C stops it.
demo: build
	./$(BIN) demo --nodes 3 --data-dir ./shoal-data

# test/ holds the multi-node suites: one package whose tests run one after another and take the
# longest. It starts at once beside the other packages, as two runs of the same test binary that
# split its tests: the porcupine-checked, re-key, stream, rolling-restart, backup-chain, disk-fault
# and TPC-C suites, then the rest (halves of 669 and 719 s of tests in one local run).
# Any failing run fails the target.
SUITE_A := ^(TestChaosShort|TestLinearizable.*|TestTxn.*|TestRESPWatch.*|TestExpiry.*|TestRekey.*|TestStream.*|TestRollingRestart.*|TestIncrementalBackupChainRestores|TestDiskFaultFailStop|TestTPCC)$$
# The packages are compiled once before the three runs start: run side by side on an empty build
# cache, each would compile the same race-instrumented dependencies again. The suites that run node
# processes (chaos) get the shoal binary linked from those packages (SHOAL_BIN): race-instrumented
# under -race, so a data race in a node fails its run, and a link where a build of their own would
# compile every dependency again without -race.
TESTBIN := $(CURDIR)/bin/shoal-test
test:
	$(GO) vet $(PKGS)
	$(GO) build $(filter -race,$(TESTFLAGS)) $(PKGS)
	$(GO) build $(filter -race,$(TESTFLAGS)) -o $(TESTBIN) ./cmd/shoal
	export SHOAL_BIN=$(TESTBIN); \
	$(GO) test $(TESTFLAGS) -run '$(SUITE_A)' ./test/ & a=$$!; \
	$(GO) test $(TESTFLAGS) -skip '$(SUITE_A)' ./test/ & b=$$!; \
	$(GO) test $(TESTFLAGS) $$($(GO) list $(PKGS) | grep -v '/test$$'); rest=$$?; \
	wait $$a; a=$$?; wait $$b; b=$$?; [ $$rest -eq 0 ] && [ $$a -eq 0 ] && [ $$b -eq 0 ]

test-short:
	$(GO) test -count=1 -short $(PKGS)

vet:
	$(GO) vet $(PKGS)

# Core store benchmarks (not tests): group commit against raw synced Pebble, idle-range memory/CPU.
.PHONY: bench-core
bench-core: build
	./$(BIN) bench group-commit --threads 64 --duration 10s
	./$(BIN) bench idle-ranges --ranges 10000 --duration 10s

fmt:
	gofmt -l -w $$(git ls-files '*.go')

# Regenerates pb/*.pb.go (needs protoc and protoc-gen-go / protoc-gen-go-grpc; the generated files are committed).
proto:
	protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative pb/shoal.proto pb/hints.proto

clean:
	rm -rf bin shoal-data

# --- bench targets ---
# YCSB A, B and C against a local 3-node Shoal cluster (gRPC and RESP), a local 3-member etcd cluster
# and a redis-server (needs Debian's etcd-server and redis-server), one after the other, plus
# redis-benchmark GET/SET on Shoal's RESP and redis; writes docs/benchmarks.md and bench-results/*.
# About 10 minutes on 2 cores; override with e.g.
# `make bench-peers RECORDS=10000 OPS=30000 THREADS=32 WORKLOADS="a b c" SYSTEMS="shoal-grpc etcd"`.
.PHONY: bench-peers
bench-peers: build
	SKIP_BUILD=1 SHOAL=./bin/shoal bash scripts/bench-peers.sh

# --- deploy and fuzz targets ---
# Container image shoal:dev (FROM scratch): the static binary is built here on the host and copied in,
# so no base image and no registry are needed. Then a local cluster with compose (deploy/compose.yaml).
IMAGE   ?= shoal:dev
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
.PHONY: docker compose-up compose-down compose-clean
docker:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o deploy/shoal ./cmd/shoal
	mkdir -p deploy/rootfs/data
	docker build -t $(IMAGE) -f deploy/Dockerfile deploy

# 3 nodes (add COMPOSE_PROFILES=five for 5); ports on 127.0.0.1 as listed in deploy/compose.yaml.
compose-up: docker
	$(COMPOSE) -f deploy/compose.yaml up -d

# Stops the cluster and keeps its volumes; compose-clean deletes them too.
compose-down:
	$(COMPOSE) -f deploy/compose.yaml down

compose-clean:
	$(COMPOSE) -f deploy/compose.yaml down -v

# Runs every fuzz target of the module (each `func FuzzXxx(f *testing.F)` in a _test.go file) for
# FUZZTIME, one after another, and fails at the end if any failed. A failing input is written to
# <package>/testdata/fuzz/<FuzzXxx>/ and from then on replayed by `go test` with the seed corpora.
# `make fuzz-list` prints the targets; FUZZ=FuzzName runs only the targets of that name.
FUZZTIME  ?= 30s
FUZZFLAGS ?=
FUZZ      ?=
.PHONY: fuzz fuzz-list
fuzz-list:
	@grep -rE --include='*_test.go' -o '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . \
		| sed -E 's#^(\./.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*).*#\1 \2#' | sort -u \
		| awk -v only='$(FUZZ)' 'only == "" || $$2 == only'

fuzz:
	@failed=""; \
	targets=$$($(MAKE) -s --no-print-directory fuzz-list | tr ' ' ':'); \
	[ -n "$$targets" ] || { echo "no fuzz targets"; exit 1; }; \
	for t in $$targets; do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test $(FUZZFLAGS) -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || failed="$$failed $$pkg:$$name"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: FAILED:$$failed"; exit 1; fi; \
	echo "fuzz: all targets passed"

# --- bench-move ---
# A replica move under load (a benchmark, not a test): the move scenario with a 1 GiB range, one
# non-leader replica moved to the fourth node while a YCSB-B-like workload runs. Writes
# bench-results/move/{report.json,*.png}; needs ~5 GiB of disk under $TMPDIR, ~6 GiB of memory and
# ~5 minutes (see docs/bench-move.md). Override with e.g. `make bench-move MOVE_ARGS="--duration 20s"`.
MOVE_ARGS ?= --records 1035000 --duration 120s
.PHONY: bench-move
bench-move: build
	./$(BIN) bench scenario move --out bench-results/move $(MOVE_ARGS)

# --- chaos ---
# The chaos suite (docs/design/chaos.md): CHAOS_RUNS randomized runs of CHAOS_DURATION each, every one
# a fresh 3-node cluster of bin/shoal processes on separate hosts (network namespaces; loopback behind
# a partitioning proxy without CAP_NET_ADMIN) under a nemesis, checked with porcupine and a final read
# of every acknowledged write; a summary table at the end. Each run prints its seed first;
# `make chaos CHAOS_SEED=S` replays run S alone. Logs of failed runs go to bench-results/chaos/.
# About 40 s per run on 2 cores (50 runs: ~35 min). Then the overload benchmark (admission control on
# vs off at 10x the sustainable write rate, peak RSS per node; ~2 min; not when replaying a seed):
# table in bench-results/chaos/overload.txt (docs/design/admission.md).
CHAOS_SEED     ?=
CHAOS_RUNS     ?= $(if $(CHAOS_SEED),1,50)
CHAOS_DURATION ?= 30s
CHAOS_MODE     ?= auto
CHAOS_ARGS     ?=
.PHONY: chaos
chaos: build
	$(GO) run ./chaos/cmd/chaos -runs $(CHAOS_RUNS) -seed $(or $(CHAOS_SEED),0) -duration $(CHAOS_DURATION) -mode $(CHAOS_MODE) -bin $(BIN) $(if $(CHAOS_SEED),-overload off) $(CHAOS_ARGS)
