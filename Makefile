# Shoal — make targets. `make demo` and `make test` are the two a newcomer needs.
GO       ?= go
BIN      := bin/shoal
PKGS     := ./...
# Race-enabled test run; the whole suite is sized to finish in well under 15 minutes on 2 cores.
TESTFLAGS ?= -race -count=1 -timeout 25m

.PHONY: all build demo test test-short vet fmt proto clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/shoal

# A local three-node cluster on loopback with data under ./shoal-data; Ctrl-C stops it.
demo: build
	./$(BIN) demo --nodes 3 --data-dir ./shoal-data

test:
	$(GO) vet $(PKGS)
	$(GO) test $(TESTFLAGS) $(PKGS)

test-short:
	$(GO) test -count=1 -short $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -l -w $$(git ls-files '*.go')

# Regenerates pb/*.pb.go (needs protoc and protoc-gen-go / protoc-gen-go-grpc; the generated files are committed).
proto:
	protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative pb/shoal.proto

clean:
	rm -rf bin shoal-data

# --- bench targets ---
# YCSB A and B against a local 3-node Shoal cluster and a local 3-member etcd cluster (needs Debian's
# etcd-server), one after the other; writes docs/benchmarks.md and bench-results/*.json. Sized for
# 2 cores; override with e.g. `make bench-peers RECORDS=10000 OPS=50000 THREADS=32 WORKLOADS="a b"`.
.PHONY: bench-peers
bench-peers: build
	SKIP_BUILD=1 SHOAL=./bin/shoal bash scripts/bench-peers.sh
