#!/usr/bin/env bash
# bench-peers.sh — YCSB workloads A and B against a local 3-node Shoal cluster and a local 3-member
# etcd cluster, on loopback, in one run; writes docs/benchmarks.md (the comparison) and the raw
# reports under bench-results/.
#
# The two systems run one after the other, never at the same time, so that neither steals the other's
# CPU on a small machine: for each workload a fresh Shoal cluster and a fresh etcd cluster in turn
# (the order alternating between workloads), each stopped after its run. Both get the same records,
# operations, threads and workload properties. Every process this script starts is stopped on exit,
# however it exits.
#
# Needs: Go (to build bin/shoal) and etcd (Debian: apt-get install etcd-server). Benchmarks are not
# tests: CI does not run this.
#
# Environment (defaults sized for a 2-core machine):
#   RECORDS=10000 OPS=50000 THREADS=32   records loaded, operations per run, client threads
#   WORKLOADS="a b"                      YCSB core workloads to run (a..f; etcd's binding fails e's scans)
#   WRITE_ALL_FIELDS=true                updates write whole records (see the note in the document)
#   MAX_DURATION=10m                     bound on each phase of each run
#   OUT_DIR=bench-results DOC=docs/benchmarks.md
#   SHOAL=bin/shoal SKIP_BUILD=          SKIP_BUILD=1 uses an existing $SHOAL
#   ETCD=etcd                            the etcd server binary
#   KEEP_TMP=                            1 keeps the clusters' data and logs (in $TMPDIR/shoal-bench-peers.*)
set -euo pipefail

cd "$(dirname "$0")/.."

RECORDS=${RECORDS:-10000}
OPS=${OPS:-50000}
THREADS=${THREADS:-32}
WORKLOADS=${WORKLOADS:-a b}
WRITE_ALL_FIELDS=${WRITE_ALL_FIELDS:-true}
MAX_DURATION=${MAX_DURATION:-10m}
OUT_DIR=${OUT_DIR:-bench-results}
DOC=${DOC:-docs/benchmarks.md}
SHOAL=${SHOAL:-bin/shoal}
ETCD=${ETCD:-etcd}
KEEP_TMP=${KEEP_TMP:-}

log() { printf '[bench-peers] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v "$ETCD" >/dev/null 2>&1 || die "etcd server not found ($ETCD): apt-get install etcd-server, or set ETCD"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/shoal-bench-peers.XXXXXX")
PGIDS=() # process groups this script started (each started with setsid, so its pid is its group)

stop_group() { # stop_group PID: SIGTERM the group, wait up to 20 s, then SIGKILL it
	local pid=$1 i
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 1 40); do
		kill -0 -- "-$pid" 2>/dev/null || return 0
		sleep 0.5
	done
	log "process group $pid did not stop in 20s: killing it"
	kill -KILL -- "-$pid" 2>/dev/null || true
}

BENCH_PID=""

cleanup() {
	local rc=$? pid
	if [[ -n $BENCH_PID ]]; then # an interrupted benchmark: let it stop (it prints what it measured)
		kill -TERM "$BENCH_PID" 2>/dev/null || true
		wait "$BENCH_PID" 2>/dev/null || true
	fi
	for pid in "${PGIDS[@]}"; do
		stop_group "$pid"
	done
	PGIDS=()
	if [[ -n $KEEP_TMP ]]; then
		log "kept data and logs in $TMP"
	else
		rm -rf "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME LOG CMD...: runs CMD in its own process group, output to LOG; sets STARTED_PID.
start() {
	local name=$1 logf=$2
	shift 2
	setsid "$@" >"$logf" 2>&1 &
	STARTED_PID=$!
	PGIDS+=("$STARTED_PID")
	log "started $name (pid $STARTED_PID, log $logf)"
}

# stop PID: stops one group started by start and forgets it.
stop() {
	local pid=$1 keep=() p
	stop_group "$pid"
	for p in "${PGIDS[@]}"; do
		[[ $p == "$pid" ]] || keep+=("$p")
	done
	PGIDS=("${keep[@]}")
}

USED_PORTS=" "
free_port() { # a loopback TCP port nobody listens on and this script has not handed out
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 40000))
		[[ $USED_PORTS == *" $p "* ]] && continue
		if ! ss -Hltn "sport = :$p" 2>/dev/null | grep . >/dev/null; then
			USED_PORTS+="$p "
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

if [[ -z ${SKIP_BUILD:-} ]]; then
	log "building $SHOAL"
	go build -o "$SHOAL" ./cmd/shoal
fi
[[ -x $SHOAL ]] || die "$SHOAL is not an executable (build it, or unset SKIP_BUILD)"

mkdir -p "$OUT_DIR/timelines" "$(dirname "$DOC")"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
REPORTS=()
FAILED=()

# bench SYSTEM TARGET HOSTS WORKLOAD: one YCSB run, its report in $OUT_DIR/SYSTEM-WORKLOAD.json.
bench() {
	local system=$1 target=$2 hosts=$3 w=$4
	local out="$OUT_DIR/$system-$w.json"
	log "YCSB workload $w on $system ($hosts): records=$RECORDS ops=$OPS threads=$THREADS"
	# In the background and waited for, so that a signal to this script is handled at once (bash
	# defers traps while a foreground child runs).
	"$SHOAL" bench ycsb --workload "$w" --target "$target" --hosts "$hosts" \
		--records "$RECORDS" --ops "$OPS" --threads "$THREADS" --max-duration "$MAX_DURATION" \
		--prop "writeallfields=$WRITE_ALL_FIELDS" --format json \
		--timeline "$OUT_DIR/timelines/$system-$w.json" >"$out.tmp" &
	BENCH_PID=$!
	if wait "$BENCH_PID"; then
		BENCH_PID=""
		mv "$out.tmp" "$out"
		REPORTS+=("$out")
	else
		BENCH_PID=""
		log "workload $w on $system failed (see above)"
		FAILED+=("$system-$w")
		rm -f "$out.tmp"
	fi
}

# --- Shoal: 3 nodes through `shoal demo` ---------------------------------------------------------
# start_shoal: a fresh cluster; sets SHOAL_PID and SHOAL_HOSTS.
start_shoal() {
	local dir="$TMP/shoal" i live=0
	rm -rf "$dir" "$TMP/shoal-demo.log" # the log too: the loop below must not read a previous run's
	start "shoal demo" "$TMP/shoal-demo.log" "$SHOAL" demo --nodes 3 --no-sample --data-dir "$dir"
	SHOAL_PID=$STARTED_PID
	SHOAL_HOSTS=""
	for i in $(seq 1 120); do
		kill -0 "$SHOAL_PID" 2>/dev/null || { cat "$TMP/shoal-demo.log" >&2 || true; die "shoal demo exited"; }
		if grep -qs "Press Ctrl-C" "$TMP/shoal-demo.log"; then
			SHOAL_HOSTS=$(grep -o 'grpc=[^ ]*' "$TMP/shoal-demo.log" | cut -d= -f2 | paste -sd, -)
			break
		fi
		sleep 0.5
	done
	[[ -n $SHOAL_HOSTS ]] || { cat "$TMP/shoal-demo.log" >&2; die "shoal demo did not come up in 60s"; }
	for i in $(seq 1 60); do
		live=$("$SHOAL" --host "$SHOAL_HOSTS" admin nodes --format json 2>/dev/null | grep -o '"live": *true' | wc -l || true)
		[[ $live -ge 3 ]] && "$SHOAL" --host "$SHOAL_HOSTS" put bench-peers-probe ok >/dev/null 2>&1 && break
		sleep 1
	done
	[[ $live -ge 3 ]] || die "Shoal cluster at $SHOAL_HOSTS did not report 3 live nodes in 60s"
	"$SHOAL" --host "$SHOAL_HOSTS" del bench-peers-probe >/dev/null 2>&1 || true
	log "Shoal cluster up: $SHOAL_HOSTS"
}

# --- etcd: 3 members ------------------------------------------------------------------------------
# start_etcd: a fresh cluster; sets ETCD_PIDS and ETCD_HOSTS.
start_etcd() {
	local cluster="" n i healthy=0
	local -a cports pports
	rm -rf "$TMP/etcd"
	mkdir -p "$TMP/etcd"
	for n in 1 2 3; do
		cports[n]=$(free_port)
		pports[n]=$(free_port)
		cluster+="${cluster:+,}e$n=http://127.0.0.1:${pports[n]}"
	done
	ETCD_HOSTS=""
	ETCD_PIDS=()
	for n in 1 2 3; do
		start "etcd member e$n" "$TMP/etcd/e$n.log" "$ETCD" --name "e$n" --data-dir "$TMP/etcd/e$n" \
			--listen-client-urls "http://127.0.0.1:${cports[n]}" --advertise-client-urls "http://127.0.0.1:${cports[n]}" \
			--listen-peer-urls "http://127.0.0.1:${pports[n]}" --initial-advertise-peer-urls "http://127.0.0.1:${pports[n]}" \
			--initial-cluster "$cluster" --initial-cluster-token shoal-bench-peers --initial-cluster-state new \
			--logger zap --log-outputs stderr
		ETCD_PIDS+=("$STARTED_PID")
		ETCD_HOSTS+="${ETCD_HOSTS:+,}127.0.0.1:${cports[n]}"
	done
	for i in $(seq 1 60); do
		healthy=0
		for n in 1 2 3; do
			if command -v curl >/dev/null 2>&1; then
				curl -fsS "http://127.0.0.1:${cports[n]}/health" 2>/dev/null | grep '"health":"true"' >/dev/null && healthy=$((healthy + 1))
			else
				healthy=3 # no curl: the benchmark's own probe waits for the cluster
			fi
		done
		[[ $healthy -ge 3 ]] && break
		sleep 1
	done
	[[ $healthy -ge 3 ]] || { tail -n 20 "$TMP"/etcd/e*.log >&2; die "etcd cluster at $ETCD_HOSTS not healthy in 60s"; }
	log "etcd cluster up: $ETCD_HOSTS"
}

run_shoal() {
	start_shoal
	bench shoal grpc "$SHOAL_HOSTS" "$1"
	stop "$SHOAL_PID"
}

run_etcd() {
	local pid
	start_etcd
	bench etcd etcd "$ETCD_HOSTS" "$1"
	for pid in "${ETCD_PIDS[@]}"; do
		stop "$pid"
	done
}

# Each workload runs on fresh clusters, one system at a time; the order alternates between
# workloads so that a drift in the machine's load does not always favour the same system.
first=shoal
for w in $WORKLOADS; do
	if [[ $first == shoal ]]; then
		run_shoal "$w"
		run_etcd "$w"
		first=etcd
	else
		run_etcd "$w"
		run_shoal "$w"
		first=shoal
	fi
done

# --- the document ---------------------------------------------------------------------------------
[[ ${#REPORTS[@]} -gt 0 ]] || die "no benchmark succeeded"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null || echo "?")
etcd_version=$("$ETCD" --version 2>/dev/null | sed -n "1s/^etcd Version: //p") # sed, not head: no SIGPIPE under pipefail
"$SHOAL" bench compare --baseline etcd --title "Benchmarks: Shoal vs etcd (YCSB)" --out "$DOC" \
	--note "Measured $(date -u +'%Y-%m-%d %H:%M UTC') at commit $commit by \`make bench-peers\` (scripts/bench-peers.sh); raw reports and per-second timelines in $OUT_DIR/." \
	--note "Machine: $(nproc) cores, $mem memory, $(uname -sr); $(go version 2>/dev/null | awk '{print $3}')." \
	--note "Shoal: 3 nodes started by \`shoal demo --no-sample\` on loopback, default settings; client: \`shoal bench ycsb --target grpc\` (package bench/ycsb: one key per record, the field map encoded by EncodeRecord)." \
	--note "etcd: $etcd_version (Debian etcd-server), 3 members on loopback, default settings (fsync on); client: go-ycsb's own etcd binding (clientv3 v3.6, JSON values)." \
	--note "The systems ran one after the other on the same machine, never together, each workload on fresh clusters (order alternating between workloads); clients and servers share its cores, so absolute numbers are low and the ratios are what matter. Load average (1, 5, 15 min) before the run: $LOAD_BEFORE; after it: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?") (other work on the machine shows here and skews both systems)." \
	--note "Reads are linearizable on both: Shoal's Get goes through the range leader's ReadIndex, etcd's default Get is a linearizable read." \
	--note "writeallfields=$WRITE_ALL_FIELDS: with true, a YCSB update writes the whole record, which both bindings do with one put (go-ycsb's etcd binding always overwrites the record with the updated fields; Shoal's binding merges, by read and compare-and-swap, only when an update carries some fields)." \
	--note "Reproduce: \`make bench-peers RECORDS=$RECORDS OPS=$OPS THREADS=$THREADS WORKLOADS='$WORKLOADS'\`." \
	"${REPORTS[@]}"
log "wrote $DOC and ${#REPORTS[@]} report(s) in $OUT_DIR/"
if [[ ${#FAILED[@]} -gt 0 ]]; then
	die "failed runs: ${FAILED[*]}"
fi
