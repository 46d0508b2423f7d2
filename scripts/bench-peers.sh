#!/usr/bin/env bash
# bench-peers.sh — the same YCSB workloads (A, B, C and the write-heavy update and insert by
# default) against Shoal through gRPC and through RESP, a 3-member etcd cluster and a single
# redis-server, all on loopback, in one run; then redis-benchmark GET/SET against Shoal's RESP
# listener and the redis-server. The disk's synced-write ceiling (raw synced Pebble batches at the
# same concurrency, `shoal bench group-commit --phases raw`) is measured before and after the
# workloads: a replicated write lands on the one disk three times, so a third of it is what 3 nodes
# on this machine could reach. Writes docs/benchmarks.md (the comparison, with the ratios to etcd and
# to redis, the ceiling and the goals) and the raw reports under bench-results/.
#
# The systems run one after the other, never at the same time, so that none steals another's CPU on
# a small machine: for each workload a fresh Shoal cluster (one for gRPC, another for RESP), a fresh
# etcd cluster and a fresh redis-server in turn (the order rotating between workloads), each stopped
# after its run. All get the same records, operations, threads and workload properties; the two RESP
# targets (Shoal and redis-server) also get the same client, go-ycsb's redis binding (go-redis, one
# pooled connection per thread, no pipelining), Shoal in cluster mode and redis-server in plain mode.
# Every process this script starts is stopped on exit, however it exits; everything listens on
# 127.0.0.1 on free ports, and data lives in a temporary directory.
#
# Needs: Go (to build bin/shoal), etcd (Debian: apt-get install etcd-server), redis-server and
# redis-benchmark (Debian: apt-get install redis-server, which pulls in redis-tools), jq (to evaluate
# the goals; without it the document only has the ratio columns). Benchmarks are not tests: CI does
# not run this.
#
# Environment (defaults sized for a 2-core machine, about 10 minutes):
#   RECORDS=10000 OPS=30000 THREADS=32   records loaded, operations per run, client threads
#   WORKLOADS="a b c update insert"      YCSB core workloads (a..f; e has no RESP run: no range scans in
#                                        the redis binding; etcd's binding fails e's scans) and the
#                                        write-heavy update (100 % updates) and insert (100 % inserts)
#   CEILING_VALUE=1100 CEILING_DURATION=10s   value size and length of the raw synced-write runs
#                                        (1,100 bytes: about a record of the gRPC binding)
#   SYSTEMS="shoal-grpc shoal-resp etcd redis"   which systems to run
#   WRITE_ALL_FIELDS=true                updates write whole records (see the note in the document)
#   MAX_DURATION=3m                      bound on each phase of each run
#   RB_REQUESTS=200000 RB_SIZE=1000      redis-benchmark requests per test and value size (RB_REQUESTS=0: skip;
#                                        short runs measure connection set-up more than the server)
#   OUT_DIR=bench-results DOC=docs/benchmarks.md
#   SHOAL=bin/shoal SKIP_BUILD=          SKIP_BUILD=1 uses an existing $SHOAL
#   ETCD=etcd REDIS_SERVER=redis-server REDIS_BENCHMARK=redis-benchmark   the peers' binaries
#   KEEP_TMP=                            1 keeps the clusters' data and logs (in $TMPDIR/shoal-bench-peers.*)
# The reports of an earlier run in $OUT_DIR are removed first.
set -euo pipefail

cd "$(dirname "$0")/.."

RECORDS=${RECORDS:-10000}
OPS=${OPS:-30000}
THREADS=${THREADS:-32}
WORKLOADS=${WORKLOADS:-a b c update insert}
CEILING_VALUE=${CEILING_VALUE:-1100}
CEILING_DURATION=${CEILING_DURATION:-10s}
SYSTEMS=${SYSTEMS:-shoal-grpc shoal-resp etcd redis}
WRITE_ALL_FIELDS=${WRITE_ALL_FIELDS:-true}
MAX_DURATION=${MAX_DURATION:-3m}
RB_REQUESTS=${RB_REQUESTS:-200000}
RB_SIZE=${RB_SIZE:-1000}
OUT_DIR=${OUT_DIR:-bench-results}
DOC=${DOC:-docs/benchmarks.md}
SHOAL=${SHOAL:-bin/shoal}
ETCD=${ETCD:-etcd}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_BENCHMARK=${REDIS_BENCHMARK:-redis-benchmark}
KEEP_TMP=${KEEP_TMP:-}

log() { printf '[bench-peers] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

has_system() { [[ " $SYSTEMS " == *" $1 "* ]]; }
for sys in $SYSTEMS; do
	case $sys in
	shoal-grpc | shoal-resp | etcd | redis) ;;
	*) die "unknown system '$sys' in SYSTEMS: use shoal-grpc, shoal-resp, etcd, redis" ;;
	esac
done
if has_system etcd; then
	command -v "$ETCD" >/dev/null 2>&1 || die "etcd server not found ($ETCD): apt-get install etcd-server, or set ETCD, or leave etcd out of SYSTEMS"
fi
if has_system redis; then
	command -v "$REDIS_SERVER" >/dev/null 2>&1 || die "redis server not found ($REDIS_SERVER): apt-get install redis-server, or set REDIS_SERVER, or leave redis out of SYSTEMS"
fi
RB=""
if [[ $RB_REQUESTS -gt 0 ]]; then
	if command -v "$REDIS_BENCHMARK" >/dev/null 2>&1; then
		RB=$REDIS_BENCHMARK
	else
		log "warning: $REDIS_BENCHMARK not found (apt-get install redis-tools): no redis-benchmark comparison"
	fi
fi
JQ=""
if command -v jq >/dev/null 2>&1; then
	JQ=jq
else
	log "warning: jq not found (apt-get install jq): the goals will not be evaluated in $DOC"
fi

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
# Reports of an earlier run must not be mistaken for this run's.
rm -f "$OUT_DIR"/*.json "$OUT_DIR"/timelines/*.json "$OUT_DIR"/redis-benchmark-*.csv "$OUT_DIR"/disk-ceiling-*.out
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
REPORTS=()
FAILED=()

# bench NAME TARGET HOSTS WORKLOAD [FLAGS...]: one YCSB run, its report in $OUT_DIR/NAME-WORKLOAD.json.
bench() {
	local name=$1 target=$2 hosts=$3 w=$4
	shift 4
	local out="$OUT_DIR/$name-$w.json"
	log "YCSB workload $w on $name ($hosts): records=$RECORDS ops=$OPS threads=$THREADS"
	# In the background and waited for, so that a signal to this script is handled at once (bash
	# defers traps while a foreground child runs).
	"$SHOAL" bench ycsb --workload "$w" --target "$target" --hosts "$hosts" "$@" \
		--records "$RECORDS" --ops "$OPS" --threads "$THREADS" --max-duration "$MAX_DURATION" \
		--prop "writeallfields=$WRITE_ALL_FIELDS" --format json \
		--timeline "$OUT_DIR/timelines/$name-$w.json" >"$out.tmp" &
	BENCH_PID=$!
	if wait "$BENCH_PID"; then
		BENCH_PID=""
		mv "$out.tmp" "$out"
		REPORTS+=("$out")
	else
		BENCH_PID=""
		log "workload $w on $name failed (see above)"
		FAILED+=("$name-$w")
		rm -f "$out.tmp"
	fi
}

# --- Shoal: 3 nodes through `shoal demo` ---------------------------------------------------------
# start_shoal: a fresh cluster; sets SHOAL_PID, SHOAL_HOSTS (gRPC) and SHOAL_RESP (RESP addresses).
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
			# "Redis (RESP): redis-cli ... (nodes: A B C)"
			SHOAL_RESP=$(sed -n 's/^Redis (RESP):.*(nodes: \(.*\))$/\1/p' "$TMP/shoal-demo.log" | tr ' ' ',')
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
	[[ -n $SHOAL_RESP ]] || die "shoal demo did not print its RESP addresses (see $TMP/shoal-demo.log)"
	log "Shoal cluster up: gRPC $SHOAL_HOSTS, RESP $SHOAL_RESP"
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

# --- redis: one redis-server ---------------------------------------------------------------------
# start_redis: a fresh server, in memory only (no snapshots, no AOF); sets REDIS_PID and REDIS_HOST.
start_redis() {
	local port i
	port=$(free_port)
	rm -rf "$TMP/redis"
	mkdir -p "$TMP/redis"
	start "redis-server" "$TMP/redis.log" "$REDIS_SERVER" --bind 127.0.0.1 --port "$port" --save "" \
		--appendonly no --dir "$TMP/redis" --daemonize no --protected-mode yes --logfile ""
	REDIS_PID=$STARTED_PID
	REDIS_HOST="127.0.0.1:$port"
	for i in $(seq 1 60); do
		kill -0 "$REDIS_PID" 2>/dev/null || { cat "$TMP/redis.log" >&2 || true; die "redis-server exited"; }
		if grep -qs "Ready to accept connections" "$TMP/redis.log"; then
			log "redis-server up: $REDIS_HOST"
			return 0
		fi
		sleep 0.5
	done
	cat "$TMP/redis.log" >&2 || true
	die "redis-server at $REDIS_HOST not ready in 30s"
}

run_shoal_grpc() {
	start_shoal
	bench shoal-grpc grpc "$SHOAL_HOSTS" "$1"
	stop "$SHOAL_PID"
}

run_shoal_resp() {
	if [[ $1 == e ]]; then
		log "workload e on shoal-resp: skipped (go-ycsb's redis binding has no range scans)"
		return
	fi
	start_shoal
	bench shoal-resp resp "$SHOAL_RESP" "$1" --redis-mode cluster
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

run_redis() {
	if [[ $1 == e ]]; then
		log "workload e on redis: skipped (go-ycsb's redis binding has no range scans)"
		return
	fi
	start_redis
	bench redis resp "$REDIS_HOST" "$1" --redis-mode plain --system redis
	stop "$REDIS_PID"
}

# --- the disk's synced-write ceiling ----------------------------------------------------------------
# ceiling TAG: raw synced Pebble batches, THREADS writers; the JSON in $OUT_DIR/disk-ceiling-TAG.out.
CEILINGS=()
ceiling() {
	local out="$OUT_DIR/disk-ceiling-$1.out"
	log "disk ceiling ($1): $THREADS writers of ${CEILING_VALUE}-byte synced batches for $CEILING_DURATION"
	"$SHOAL" bench group-commit --phases raw --threads "$THREADS" --value-bytes "$CEILING_VALUE" --duration "$CEILING_DURATION" >"$out.tmp" 2>/dev/null &
	BENCH_PID=$!
	if wait "$BENCH_PID"; then
		BENCH_PID=""
		mv "$out.tmp" "$out"
		CEILINGS+=("$(sed -n 's/.*"raw_pebble_synced_ops_per_sec": *\([0-9.]*\).*/\1/p' "$out")")
	else
		BENCH_PID=""
		log "disk ceiling run failed"
		rm -f "$out.tmp"
	fi
}
ceiling before

# Each workload runs on fresh clusters, one system at a time; the order rotates between workloads
# so that a drift in the machine's load does not always favour the same system.
read -r -a order <<<"$SYSTEMS"
rot=0
for w in $WORKLOADS; do
	for ((i = 0; i < ${#order[@]}; i++)); do
		sys=${order[$(((i + rot) % ${#order[@]}))]}
		"run_${sys//-/_}" "$w"
	done
	rot=$((rot + 1))
done

ceiling after
CEILING=""
if [[ ${#CEILINGS[@]} -gt 0 ]]; then
	CEILING=$(printf '%s\n' "${CEILINGS[@]}" | awk '{ s += $1; n++ } END { if (n > 0) printf "%.0f", s / n }')
fi

# --- redis-benchmark: GET and SET against Shoal's RESP listener and redis-server ---------------------
# rb NAME HOST:PORT: redis-benchmark's CSV in $OUT_DIR/redis-benchmark-NAME.csv.
RB_DONE=()
rb() {
	local name=$1 host=${2%:*} port=${2##*:} out="$OUT_DIR/redis-benchmark-$1.csv"
	log "redis-benchmark -t set,get on $name ($2): -n $RB_REQUESTS -c $THREADS -d $RB_SIZE -r $RECORDS"
	"$RB" -h "$host" -p "$port" -t set,get -n "$RB_REQUESTS" -c "$THREADS" -d "$RB_SIZE" -r "$RECORDS" --csv >"$out.tmp" 2>"$TMP/rb-$name.err" &
	BENCH_PID=$!
	if wait "$BENCH_PID" && grep -q '^"GET"' "$out.tmp"; then
		BENCH_PID=""
		mv "$out.tmp" "$out"
		RB_DONE+=("$name")
	else
		BENCH_PID=""
		cat "$TMP/rb-$name.err" >&2 || true
		log "redis-benchmark on $name failed"
		FAILED+=("redis-benchmark-$name")
		rm -f "$out.tmp"
	fi
}

# slot0_owner ADDR: the RESP address of the node that owns slot 0, from CLUSTER NODES (redis-cli
# comes with redis-benchmark in redis-tools).
# redis-benchmark's --cluster mode wants at least 3 masters with slots; a fresh Shoal cluster has
# all slots in one range, led by one node, so redis-benchmark talks to that node directly (a
# request to another node would be forwarded, a hop the cluster clients avoid).
slot0_owner() {
	local host=${1%:*} port=${1##*:}
	redis-cli -h "$host" -p "$port" cluster nodes 2>/dev/null |
		awk '{ for (i = 9; i <= NF; i++) if ($i == "0" || $i ~ /^0-/) { sub(/@.*/, "", $2); print $2; exit } }'
}

RB_SHOAL_ADDR=""
if [[ -n $RB ]]; then
	if has_system shoal-resp; then
		start_shoal
		# redis-benchmark is not cluster-aware: keep the slots' leadership where it is for the run, so
		# that it measures the node serving its own range rather than the forwarding hop taken when
		# the autopilot's rebalance moves that leadership mid-run (cluster clients would follow MOVED).
		"$SHOAL" --host "$SHOAL_HOSTS" admin policy set rebalance off >/dev/null 2>&1 || log "warning: could not switch rebalance off"
		sleep 2
		first_resp=${SHOAL_RESP%%,*}
		RB_SHOAL_ADDR=$(slot0_owner "$first_resp")
		RB_SHOAL_ADDR=${RB_SHOAL_ADDR:-$first_resp}
		rb shoal-resp "$RB_SHOAL_ADDR"
		stop "$SHOAL_PID"
	fi
	if has_system redis; then
		start_redis
		rb redis "$REDIS_HOST"
		stop "$REDIS_PID"
	fi
fi

# --- the document ---------------------------------------------------------------------------------
[[ ${#REPORTS[@]} -gt 0 ]] || die "no benchmark succeeded"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null || echo "?")
etcd_version="?"
if has_system etcd; then
	etcd_version=$("$ETCD" --version 2>/dev/null | sed -n "1s/^etcd Version: //p") # sed, not head: no SIGPIPE under pipefail
fi
redis_version="?"
if has_system redis; then
	redis_version=$("$REDIS_SERVER" --version 2>/dev/null | sed -n 's/.* v=\([^ ]*\).*/\1/p')
fi
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
"$SHOAL" bench compare --baseline etcd,redis --title "Benchmarks: Shoal vs etcd and redis (YCSB)" --out "$DOC" \
	--note "Measured $(date -u +'%Y-%m-%d %H:%M UTC') at commit $commit; raw reports and per-second timelines in $OUT_DIR/. Reproduce: \`make bench-peers RECORDS=$RECORDS OPS=$OPS THREADS=$THREADS WORKLOADS='$WORKLOADS'\` (writeallfields=$WRITE_ALL_FIELDS)." \
	--note "$(nproc) cores, $mem, $(uname -sr), $(go version 2>/dev/null | awk '{print $3}'), **shared with other jobs** (load average, 1, 5 and 15 min: $LOAD_BEFORE before, $LOAD_AFTER after): a rerun can differ by tens of percent; compare ratios, not absolute figures." \
	--note "Shoal: 3 nodes by \`shoal demo --no-sample\` on loopback, defaults (3 replicas, fsync on, linearizable reads through the leader's ReadIndex). **shoal (grpc)**: \`shoal bench ycsb --target grpc\` (one key per record, 1,081 bytes). **shoal (resp)**: \`--target resp --redis-mode cluster\`, go-ycsb's redis binding (go-redis v9.0.0-rc.1 ClusterClient) on the nodes' RESP listeners." \
	--note "etcd $etcd_version, 3 members on loopback, defaults (fsync on, linearizable Get); go-ycsb's etcd binding (clientv3 v3.6, JSON values). redis-server $redis_version, one process in memory (\`--save '' --appendonly no\`), the same redis binding in plain mode: not like for like, Shoal replicates and fsyncs every write." \
	--note "Both RESP targets store a record as one JSON string (~1.5 KB): a read is one GET, a write one SET; one connection per client thread, no pipelining. Systems ran one after the other, each workload on fresh clusters. UPDATE (100 % zipfian updates) and INSERT (100 % new keys) are not upstream YCSB workloads (\`--workload update|insert\`)." \
	--note "Disk ceiling: $THREADS writers committing synced ${CEILING_VALUE}-byte Pebble batches (\`shoal bench group-commit --phases raw --threads $THREADS --value-bytes $CEILING_VALUE\`) before and after: ${CEILINGS[*]:-not measured} writes/s, mean ${CEILING:-?}. Three nodes on one disk write every update three times: the replicated ceiling is a third." \
	"${REPORTS[@]}"

# rb_field NAME TEST COLUMN: a field of redis-benchmark's CSV (2 rps, 5 p50 ms, 7 p99 ms).
rb_field() {
	awk -F'","' -v t="$2" -v c="$3" '{ gsub(/^"|"$/, "") } $1 == t { print $c }' "$OUT_DIR/redis-benchmark-$1.csv"
}
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

if [[ ${#RB_DONE[@]} -gt 0 ]]; then
	{
		printf '\n## redis-benchmark\n\n'
		printf '`redis-benchmark -t set,get -n %s -c %s -d %s -r %s` (no pipelining)' "$RB_REQUESTS" "$THREADS" "$RB_SIZE" "$RECORDS"
		printf ' against a fresh Shoal cluster'"'"'s RESP listener on the node owning the slots (%s; redis-benchmark'"'"'s `--cluster` mode needs 3 masters with slots, and a fresh cluster has one range; the rebalance policy is switched off for this run so that the slots stay on that node) and against a fresh redis-server.\n\n' "${RB_SHOAL_ADDR:-none}"
		printf '| Test | System | Requests/s | p50 (ms) | p99 (ms) | Requests/s / redis |\n| --- | --- | ---: | ---: | ---: | ---: |\n'
		for t in SET GET; do
			for name in "${RB_DONE[@]}"; do
				r=$(rb_field "$name" "$t" 2)
				x="—"
				if [[ $name != redis && " ${RB_DONE[*]} " == *" redis "* ]]; then
					x="$(div "$r" "$(rb_field redis "$t" 2)")×"
				fi
				label=$name
				[[ $name == shoal-resp ]] && label="shoal (resp)"
				printf '| %s | %s | %.0f | %s | %s | %s |\n' "$t" "$label" "$r" "$(rb_field "$name" "$t" 5)" "$(rb_field "$name" "$t" 7)" "$x"
			done
		done
	} >>"$DOC"
fi

# pair_ratios REPORT BASE: "THROUGHPUT_RATIO WORST_P99_RATIO WORST_OP CLEAN" — the p99 ratio is the
# largest over the operations both reports measured; CLEAN is true when neither had errors or was cut.
pair_ratios() {
	"$JQ" -rn --slurpfile a "$1" --slurpfile b "$2" '
		$a[0] as $x | $b[0] as $y
		| [ $x.operations | to_entries[] | select(.value.count > .value.errors) | .key as $k
		    | ($y.operations[$k] // null) as $o | select($o != null and $o.count > $o.errors and $o.p99_ms > 0)
		    | {op: $k, r: (.value.p99_ms / $o.p99_ms)} ] as $rs
		| (if $y.throughput_ops_s > 0 then $x.throughput_ops_s / $y.throughput_ops_s else 0 end) as $t
		| (($x.errors + $y.errors) == 0 and ($x.truncated | not) and ($y.truncated | not)) as $clean
		| if ($rs | length) == 0 then "\($t) 0 - \($clean)" else ($rs | max_by(.r)) as $w | "\($t) \($w.r) \($w.op) \($clean)" end'
}

# op_p99_ratio REPORT BASE OP: the p99 of OP in REPORT over its p99 in BASE (0 if either lacks it).
op_p99_ratio() {
	"$JQ" -rn --slurpfile a "$1" --slurpfile b "$2" --arg op "$3" '
		($a[0].operations[$op] // null) as $x | ($b[0].operations[$op] // null) as $y
		| if $x == null or $y == null or $y.p99_ms <= 0 or $x.count <= $x.errors then 0 else $x.p99_ms / $y.p99_ms end'
}

# goal_row LABEL W GOAL MEASURED MET
goal_row() { printf '| %s | %s | %s | %s | %s |\n' "$1" "${2^^}" "$3" "$4" "$5"; }

if [[ -n $JQ ]]; then
	{
		printf '\n## Goals\n\n'
		printf 'Measured on a shared machine (see Setup): the systems ran one after the other, and a rerun can differ by tens of percent.\n\n'
		printf '| System | Workload | Goal | Measured | Met |\n| --- | --- | --- | --- | --- |\n'
		for sys in shoal-grpc shoal-resp; do
			label="shoal (${sys#shoal-})"
			for w in $WORKLOADS; do
				a="$OUT_DIR/$sys-$w.json" b="$OUT_DIR/etcd-$w.json"
				[[ -f $a ]] || continue
				clean_a=$("$JQ" -r '(.errors == 0 and (.truncated | not))' "$a")
				case $w in
				a | b)
					[[ -f $b ]] || continue
					read -r t p op clean < <(pair_ratios "$a" "$b")
					u=$(op_p99_ratio "$a" "$b" UPDATE)
					want=2
					[[ $w == a ]] && want=2.5
					met=no
					if [[ $clean == true ]] && ge "$t" "$want" && ge 1 "$u" && awk -v u="$u" 'BEGIN { exit !(u > 0) }'; then met=yes; fi
					[[ $clean == true ]] || met="no (errors or truncated)"
					goal_row "$label" "$w" "≥ ${want}× etcd's throughput, UPDATE p99 ≤ etcd's" \
						"$(div "$t" 1)× throughput; UPDATE p99 $(div "$u" 1)× etcd's (worst op $(div "$p" 1)×, $op)" "$met"
					;;
				update)
					if [[ -n $CEILING ]]; then
						tput=$("$JQ" -r '.throughput_ops_s' "$a")
						pc=$(awk -v a="$tput" -v c="$CEILING" 'BEGIN { printf "%.0f", 100 * a / (c / 3) }')
						met=no
						if [[ $clean_a == true ]] && ge "$pc" 60; then met=yes; fi
						goal_row "$label" "$w" "≥ 60 % of the replicated disk ceiling (ceiling / 3)" \
							"$(printf '%.0f' "$tput") ops/s = $pc % of $CEILING / 3" "$met"
					fi
					if [[ -f $b ]]; then
						read -r t p op clean < <(pair_ratios "$a" "$b")
						goal_row "$label" "$w" "(against etcd)" "$(div "$t" 1)× throughput; p99 $(div "$p" 1)× etcd's" "—"
					fi
					;;
				*)
					[[ -f $b ]] || continue
					read -r t p op clean < <(pair_ratios "$a" "$b")
					met=no
					if [[ $clean == true ]] && ge "$t" 2 && ge 1 "$p"; then met=yes; fi
					[[ $clean == true ]] || met="no (errors or truncated)"
					goal_row "$label" "$w" "≥ 2× etcd's throughput, every p99 ≤ etcd's" "$(div "$t" 1)× throughput; p99 up to $(div "$p" 1)× etcd's ($op)" "$met"
					;;
				esac
			done
		done
		a="$OUT_DIR/shoal-resp-c.json" b="$OUT_DIR/redis-c.json"
		if [[ -f $a && -f $b ]]; then
			read -r t p op clean < <(pair_ratios "$a" "$b")
			met=no
			if [[ $clean == true ]] && ge "$t" 0.5; then met=yes; fi
			goal_row "shoal (resp)" c "GET ≥ 50 % of redis-server (YCSB, 100 % GET)" "$(div "$t" 1)× redis's throughput; p99 $(div "$p" 1)×" "$met"
		fi
		if [[ " ${RB_DONE[*]} " == *" shoal-resp "* && " ${RB_DONE[*]} " == *" redis "* ]]; then
			t=$(div "$(rb_field shoal-resp GET 2)" "$(rb_field redis GET 2)")
			met=no
			if ge "$t" 0.5; then met=yes; fi
			goal_row "shoal (resp)" — "GET ≥ 50 % of redis-server (redis-benchmark GET)" "$t× redis's requests/s" "$met"
		fi
	} >>"$DOC"
fi
log "wrote $DOC and ${#REPORTS[@]} report(s) in $OUT_DIR/"
if [[ ${#FAILED[@]} -gt 0 ]]; then
	die "failed runs: ${FAILED[*]}"
fi
