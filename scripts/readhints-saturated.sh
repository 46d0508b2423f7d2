#!/usr/bin/env bash
# Issue 9: the steady-state cost of read hints on a saturated node whose followers run elsewhere.
#
# Three `shoal start` processes on loopback: n1 (the serving node, every leadership gathered on it)
# pinned to one core, n2 and n3 (followers) and the YCSB client pinned to the other. The client
# (YCSB C, zipfian, read-only) runs enough threads to saturate n1. On two cores the client cannot
# saturate a whole core of n1 from the other one (it needs about as much CPU per read as n1, and the
# followers' replays share its core, so a hints-on window would slow the client, not n1): n1 is
# therefore also capped at LEADER_QUOTA cores (default 0.5) by a cgroup-v1 CPU quota, so that n1 is
# the bottleneck and the client's core keeps headroom (LEADER_QUOTA= : no cap; the script checks). Read hints are on (product
# defaults: every replica, fraction 1, adaptive fraction ON) and switched off and on cluster-wide
# (the read_hints policy) every WINDOW seconds within one run, so the same cluster and cache are
# compared with themselves: SCHEDULE=alt (default) alternates off, on, off, …; SCHEDULE=abba runs pairs
# of windows in ABBA order (off, on | on, off | …) and reports the cost's mean over the pairs with a 95 %
# confidence interval and their median (scripts/readhints_stats.py). The windows start once no engine
# has compacted or flushed for SETTLE seconds after the load (compactions swung n1's throughput by
# ±20 % between windows otherwise). A sampler reads every node's /metrics and every process's CPU
# (/proc/PID/stat) once a second, with its run-queue wait (time runnable but not running, the second
# field of /proc/PID/task/*/schedstat summed over the threads) and the machine's steal and iowait time
# (/proc/stat); the analysis prints per-window and on/off figures, among them the client's and each
# node's run-queue wait per request and the steal share of each window, and the paired cost again over
# the pairs in which no window lost STEAL_MAX (8 %) of the machine's CPU time to the host (a VM's
# steal; session 22's outliers), and writes OUT/result.json, OUT/samples.jsonl.
#
#   flock /tmp/bench.lock scripts/readhints-saturated.sh            # ~8 min; OUT=/tmp/readhints-saturated
#   BIN=/tmp/rh/shoal OUT=/tmp/rs THREADS=64 WINDOW=20 WINDOWS=10 scripts/readhints-saturated.sh
#   BIN=/tmp/rh/shoal OUT=/tmp/rs SCHEDULE=abba WINDOW=12 WINDOWS=60 scripts/readhints-saturated.sh   # 30 pairs
#   LEADER_QUOTA= THREADS=1 FOLLOWER_SHARES=2 SCHEDULE=abba WINDOW=12 WINDOWS=60 scripts/readhints-saturated.sh
#       # an unsaturated leader (uncapped, one client thread), the followers yielding their shared
#       # core to the client as if they ran elsewhere (docs/bench-read-hints.md, session 17)
#   LEADER_QUOTA= THREADS=1 FOLLOWER_IDLE=1 SCHEDULE=abba WINDOW=4 WINDOWS=200 SKIP=2 SWITCH_INTERVAL=100ms \
#     TIMELINE_INTERVAL=100ms FOLLOWER_FRACTION=0.001 scripts/readhints-saturated.sh
#       # the serving node's own cost, as the journal measured it (its replicas on machines of their
#       # own): short windows rated from the client's 100-ms timeline, the switch read every 100 ms,
#       # and the followers receiving every batch but replaying 0.1 % of the hints, whose replays
#       # would otherwise run on the leader's and client's hardware (session 28)
#
# Needs taskset, curl, jq, python3 and at least two cores. Nodes use the real disk and the OS page
# cache (no emulated disks: `shoal start` has none), so a block-cache miss costs a page-cache copy.
set -euo pipefail

BIN=${BIN:-bin/shoal}
OUT=${OUT:-/tmp/readhints-saturated}
RECORDS=${RECORDS:-250000}     # 1 KB each (10 fields of 100 B): ~250 MB, > the block cache
CACHE=${CACHE:-96MiB}
THREADS=${THREADS:-64}
LOAD_THREADS=${LOAD_THREADS:-32}
WINDOW=${WINDOW:-20}           # seconds per window
WINDOWS=${WINDOWS:-10}         # toggled windows after a warm-up window (off, on, off, on, ...)
STEAL_MAX=${STEAL_MAX:-0.08}   # pairs with a window the host stole this share of the CPU from are also reported apart
SCHEDULE=${SCHEDULE:-alt}      # alt: off, on, off, on, ...; abba: off, on | on, off | off, on | ... (WINDOWS even); alt-inverted: on, off, ...
SETTLE=${SETTLE:-20}           # seconds without a compaction or flush on any node before the windows start
SETTLE_MAX=${SETTLE_MAX:-900}  # at most this long
SKIP=${SKIP:-4}                # seconds ignored after each switch (nodes read the switch every 2 s; may be fractional)
LEADER_CPU=${LEADER_CPU:-0}
LEADER_QUOTA=${LEADER_QUOTA-0.5}   # cores n1 may use (cgroup v1 cpu.cfs_quota_us); empty: no cap
FOLLOWER_QUOTA=${FOLLOWER_QUOTA:-}  # cores each follower may use (e.g. 0.1: saturated followers, to see the adaptive fraction act)
FOLLOWER_SHARES=${FOLLOWER_SHARES:-}  # cgroup cpu.shares of each follower (e.g. 2): the client preempts them on the core they share, as if they ran on machines of their own
FOLLOWER_IDLE=${FOLLOWER_IDLE:-}  # 1: each follower's cgroup is cpu.idle (SCHED_IDLE): a waking client preempts a running follower at once, where low shares still let it finish its slice first
CGROUP= FCGROUP=
OTHER_CPU=${OTHER_CPU:-1}
BASE_PORT=${BASE_PORT:-27300}
DISTRIBUTION=${DISTRIBUTION:-zipfian}
EXTRA_NODE_FLAGS=${EXTRA_NODE_FLAGS:-}   # e.g. "--read-hints-adaptive off"
FOLLOWER_FRACTION=${FOLLOWER_FRACTION:-}  # e.g. 0.001: n2 and n3 replay only this fraction of the hints they receive (--read-hints-fraction)
PROFILE=${PROFILE:-}           # non-empty: CPU profiles of n1 and n2 in windows 1 (off) and 2 (on): OUT/n[12]-hints-*.pprof
BARRIER=${BARRIER:-}           # a directory shared by PEERS runs at once (scripts/readhints-sidebyside.sh): their windows start together
PEERS=${PEERS:-2}
SWITCH_INTERVAL=${SWITCH_INTERVAL:-}    # e.g. 100ms: how often the nodes read the read_hints switch (their default: 2s); short windows need it short
TIMELINE_INTERVAL=${TIMELINE_INTERVAL:-}  # e.g. 100ms: the client's timeline resolution; set, each window's rate comes from the client's timeline

BIN=$(readlink -f "$BIN")
SCRIPTS=$(dirname "$(readlink -f "$0")")
python3 -c "import sys; sys.path.insert(0, '$SCRIPTS'); import readhints_stats as rs; rs.window_on(1, '$SCHEDULE')"
rm -rf "$OUT"
mkdir -p "$OUT/data"
G=() H=() PIDS=()
for i in 1 2 3; do
  G[$i]=127.0.0.1:$((BASE_PORT + i))
  H[$i]=127.0.0.1:$((BASE_PORT + 10 + i))
done
HOSTS="${G[1]},${G[2]},${G[3]}"
adm() { "$BIN" --host "$HOSTS" --timeout 30s "$@"; }

cleanup() {
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && wait "$p" 2>/dev/null || true
  done
  [ -n "${KEEP_DATA:-}" ] || rm -rf "$OUT/data"
  [ -z "$CGROUP" ] || rmdir "$CGROUP" 2>/dev/null || true
  for d in $FCGROUP; do rmdir "$d" 2>/dev/null || true; done
}
trap cleanup EXIT

start_node() { # i cpu cgroup extra-args...
  local i=$1 cpu=$2 cg=$3
  shift 3
  CG="$cg" taskset -c "$cpu" sh -c '[ -z "$CG" ] || echo $$ >"$CG/cgroup.procs"; exec "$@"' sh "$BIN" start --data-dir "$OUT/data/n$i" --listen "${G[$i]}" --http "${H[$i]}" \
    --cache-size "$CACHE" ${SWITCH_INTERVAL:+--read-hints-switch-interval "$SWITCH_INTERVAL"} $EXTRA_NODE_FLAGS "$@" >"$OUT/n$i.log" 2>&1 &
  PIDS[$i]=$!
  for _ in $(seq 120); do
    grep -q " ready " "$OUT/n$i.log" && return 0
    kill -0 "${PIDS[$i]}" 2>/dev/null || { echo "n$i exited:"; tail -20 "$OUT/n$i.log"; exit 1; }
    sleep 0.5
  done
  echo "n$i not ready after 60 s"; exit 1
}

echo "$(date -u +%T) binary $BIN ($("$BIN" version 2>/dev/null | head -1 || true)); load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$LEADER_QUOTA" ]; then
  CGROUP=/sys/fs/cgroup/cpu/shoal-readhints-$$
  mkdir "$CGROUP"
  echo 20000 >"$CGROUP/cpu.cfs_period_us"
  Q=$(awk -v q="$LEADER_QUOTA" 'BEGIN { printf "%d", q * 20000 }')
  echo "$Q" >"$CGROUP/cpu.cfs_quota_us"
fi
start_node 1 "$LEADER_CPU" "$CGROUP" --bootstrap
F2= F3=
if [ -n "$FOLLOWER_QUOTA$FOLLOWER_SHARES$FOLLOWER_IDLE" ]; then
  for i in 2 3; do
    d=/sys/fs/cgroup/cpu/shoal-readhints-$$-n$i
    mkdir "$d"
    FCGROUP="$FCGROUP $d"
    if [ -n "$FOLLOWER_QUOTA" ]; then
      echo 20000 >"$d/cpu.cfs_period_us"
      Q=$(awk -v q="$FOLLOWER_QUOTA" 'BEGIN { printf "%d", q * 20000 }')
      echo "$Q" >"$d/cpu.cfs_quota_us"
    fi
    [ -z "$FOLLOWER_SHARES" ] || echo "$FOLLOWER_SHARES" >"$d/cpu.shares"
    [ -z "$FOLLOWER_IDLE" ] || echo 1 >"$d/cpu.idle"
    eval "F$i=$d"
  done
fi
start_node 2 "$OTHER_CPU" "" --join "${G[1]}" ${FOLLOWER_FRACTION:+--read-hints-fraction "$FOLLOWER_FRACTION"}
start_node 3 "$OTHER_CPU" "" --join "${G[1]}" ${FOLLOWER_FRACTION:+--read-hints-fraction "$FOLLOWER_FRACTION"}
N1=$(grep -o "shoal node [0-9]* ready" "$OUT/n1.log" | awk '{print $3}')
echo "$(date -u +%T) nodes up (n1 = node $N1 on cpu $LEADER_CPU, capped at ${LEADER_QUOTA:-1} cores; n2, n3 on cpu $OTHER_CPU)"

for p in rebalance merge load_split shed_leadership; do adm admin policy set $p off >/dev/null; done
adm admin policy set read_hints on >/dev/null
# Six data ranges (keys are usertable/user<decimal 64-bit hash>; about half start with "1").
for k in usertable/user12 usertable/user14 usertable/user16 usertable/user3 usertable/user6; do
  for _ in $(seq 30); do adm admin split "$k" >/dev/null 2>&1 && break; sleep 1; done
done
for _ in $(seq 120); do
  [ "$(adm admin ranges --format json | jq '[.[] | (.replicas | length)] | min')" = 3 ] && break
  sleep 1
done
echo "$(date -u +%T) $(adm admin ranges --format json | jq length) ranges, 3 replicas each; loading $RECORDS records"
"$BIN" bench ycsb --workload c --hosts "$HOSTS" --records "$RECORDS" --ops 1 --threads "$LOAD_THREADS" \
  --format json >"$OUT/load.json" 2>"$OUT/load.log"

gather() {
  for _ in $(seq 60); do
    local ids
    ids=$(adm admin ranges --format json | jq -r --argjson n "$N1" '.[] | select(.leader != $n) | .id')
    [ -z "$ids" ] && return 0
    for id in $ids; do adm admin transfer-leader "$id" "$N1" >/dev/null 2>&1 || true; done
    sleep 1
  done
  echo "leaderships not gathered on n1:"; adm admin ranges; exit 1
}
gather
# The load leaves every engine compacting for minutes (n1 within its quota), which swung n1's
# throughput by ±20 % between windows in session 8's first 47 windows: wait until no node has
# finished a compaction or flush for SETTLE seconds (at most SETTLE_MAX), so that the windows
# compare hints on and off, not compaction and none. SETTLE=0 skips it.
compactions() {
  local sum=0 h v
  for h in "${H[@]}"; do
    v=$(curl -s "http://$h/metrics" | awk '/^shoal_storage_(compactions|flushes)_total /{s+=$2} END{printf "%d", s}')
    sum=$((sum + v))
  done
  echo "$sum"
}
if [ "$SETTLE" -gt 0 ]; then
  last=$(compactions) quiet=0 waited=0
  while [ "$quiet" -lt "$SETTLE" ] && [ "$waited" -lt "$SETTLE_MAX" ]; do
    sleep 1
    waited=$((waited + 1))
    now=$(compactions)
    if [ "$now" = "$last" ]; then quiet=$((quiet + 1)); else quiet=0 last=$now; fi
  done
  echo "$(date -u +%T) compactions settled after ${waited} s ($last compactions and flushes so far; quiet for ${quiet} s, want $SETTLE)"
fi
# Followers are capped only now: capped during the load they apply ~150 writes/s.
[ -z "$F2" ] || { echo "${PIDS[2]}" >"$F2/cgroup.procs"; echo "${PIDS[3]}" >"$F3/cgroup.procs"; echo "n2, n3 capped at ${FOLLOWER_QUOTA:-1} cores each, cpu.shares ${FOLLOWER_SHARES:-1024}, cpu.idle ${FOLLOWER_IDLE:-0}"; }
echo "$(date -u +%T) every leadership on n1; running YCSB C ($DISTRIBUTION, $THREADS threads) for $(((WINDOWS + 1) * WINDOW)) s"

# Side by side: wait until every peer is ready, then all start their windows at the same second
# (the latest peer's ready time + 5 s), so that window k is the same wall-clock time in each.
START=
if [ -n "$BARRIER" ]; then
  mkdir -p "$BARRIER"
  date +%s >"$BARRIER/ready.$BASE_PORT"
  peers() { find "$BARRIER" -name 'ready.*' | wc -l; }
  for _ in $(seq "$SETTLE_MAX"); do [ "$(peers)" -ge "$PEERS" ] && break; sleep 1; done
  [ "$(peers)" -ge "$PEERS" ] || { echo "only $(peers) of $PEERS runs ready at $BARRIER after ${SETTLE_MAX} s"; exit 1; }
  START=$(($(cat "$BARRIER"/ready.* | sort -n | tail -1) + 5))
  echo "$(date -u +%T) $PEERS runs ready; windows start at $(date -u -d "@$START" +%T)"
  while [ "$(date +%s)" -lt "$START" ]; do sleep 0.05; done
fi
RUN_S=$(((WINDOWS + 1) * WINDOW))
taskset -c "$OTHER_CPU" "$BIN" bench ycsb --workload c --load=false --hosts "$HOSTS" --records "$RECORDS" \
  --ops 1000000000 --max-duration "$((RUN_S + 5))s" --threads "$THREADS" --distribution "$DISTRIBUTION" \
  --timeline "$OUT/timeline.json" ${TIMELINE_INTERVAL:+--timeline-interval "$TIMELINE_INTERVAL"} --format json >"$OUT/ycsb.json" 2>"$OUT/ycsb.log" &
CLIENT=$!

taskset -c "$OTHER_CPU" python3 - "$OUT" "$BIN" "$HOSTS" "$WINDOW" "$WINDOWS" "$SKIP" "$CLIENT" \
  "${PIDS[1]},${PIDS[2]},${PIDS[3]}" "${H[1]},${H[2]},${H[3]}" "${PROFILE:-}" "$SCRIPTS" "$SCHEDULE" "$START" <<'PY'
import json, os, subprocess, sys, threading, time, urllib.request

out, binp, hosts, window, windows, skip, client, pids, https, profile, scripts, schedule, start = sys.argv[1:]
sys.path.insert(0, scripts)
import readhints_stats as rs
window, windows, skip, client = int(window), int(windows), float(skip), int(client)
pids = [int(p) for p in pids.split(",")]
https = https.split(",")
tick = os.sysconf("SC_CLK_TCK")

def cpu_s(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / tick
    except OSError:
        return float("nan")

def runq_s(pid):
    """Seconds the process's threads have waited runnable in a run queue (exited threads drop out)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return float("nan")
    for tid in tids:
        try:
            total += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[1])
        except (OSError, IndexError, ValueError):
            pass  # the thread exited meanwhile
    return total / 1e9

STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")

def host_stat():
    """/proc/stat's cpu lines in jiffies: {"cpu": [user ... steal], "cpu0": [...], ...}."""
    stat = {}
    for line in open("/proc/stat"):
        if line.startswith("cpu"):
            f = line.split()
            stat[f[0]] = [int(x) for x in f[1:1 + len(STAT_FIELDS)]]
    return stat

WANT = ("shoal_grpc_requests_total", "shoal_hints_apply_fraction", "shoal_hints_load", "shoal_hints_paused",
        "shoal_hints_applied_total", "shoal_hints_recorded_total", "shoal_hints_sent_bytes_total",
        "shoal_hints_received_total", "shoal_hints_dropped_total", "shoal_storage_block_cache_hits_total",
        "shoal_storage_block_cache_misses_total", "shoal_hints_capture_fraction", "shoal_hints_capture_load",
        "shoal_hints_replay_cache_bytes_total", "shoal_storage_compactions_total", "shoal_storage_flushes_total")

def metrics(h):
    m = {}
    try:
        body = urllib.request.urlopen(f"http://{h}/metrics", timeout=2).read().decode()
    except OSError:
        return m
    for line in body.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in WANT:
            try:
                v = float(line.rsplit(" ", 1)[1])
            except ValueError:
                continue
            m[name] = m.get(name, 0.0) + v
            if "{" in line:  # also per label value, e.g. shoal_hints_dropped_total:sampled
                lab = line.split("{", 1)[1].split("}", 1)[0].split('"')
                if len(lab) >= 2:
                    m[f"{name}:{lab[1]}"] = v
    return m

t0 = float(start) if start else time.time()  # side by side: the peers' common start
switches = [(t0 + window * k, rs.window_on(k, schedule)) for k in range(1, windows + 1)]
samples = open(f"{out}/samples.jsonl", "w")
samples.write(json.dumps({"t0": t0}) + "\n")  # the windows' origin in Unix seconds (the client's timeline is in Unix time)
end = t0 + window * (windows + 1)
nxt = t0
while time.time() < end - 0.5:
    nxt += 1
    while switches and time.time() >= switches[0][0]:
        at, on = switches.pop(0)
        subprocess.run([binp, "--host", hosts, "admin", "policy", "set", "read_hints", "on" if on else "off"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.write(json.dumps({"t": round(time.time() - t0, 3), "switch": "on" if on else "off"}) + "\n")
        k = round((at - t0) / window)
        if profile and k in (1, 2):
            # CPU profiles of n1 (the leader) and n2 (a follower) over window 1 (hints off) and window 2
            # (on), after the switch has settled (both schedules start off, on).
            def prof(node, name, secs=window - skip - 1):
                time.sleep(skip)
                data = urllib.request.urlopen(f"http://{https[node]}/debug/pprof/profile?seconds={secs}", timeout=secs + 30).read()
                open(f"{out}/{name}", "wb").write(data)
            for node in (0, 1):
                threading.Thread(target=prof, args=(node, f"n{node + 1}-hints-{'on' if on else 'off'}.pprof"), daemon=True).start()
    s = {"t": round(time.time() - t0, 3), "loadavg": float(open("/proc/loadavg").read().split()[0]),
         "cpu": [cpu_s(p) for p in pids] + [cpu_s(client)], "runq": [runq_s(p) for p in pids] + [runq_s(client)],
         "stat": host_stat(), "nodes": [metrics(h) for h in https]}
    samples.write(json.dumps(s) + "\n")
    samples.flush()
    time.sleep(max(0, nxt - time.time()))
samples.close()
PY
wait "$CLIENT" || true
adm admin policy set read_hints on >/dev/null || true

python3 - "$OUT" "$WINDOW" "$WINDOWS" "$SKIP" "${LEADER_QUOTA:-1}" "$SCRIPTS" "$SCHEDULE" "$STEAL_MAX" "$TIMELINE_INTERVAL" <<'PY'
import json, math, statistics as st, sys
out, window, windows, skip = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
quota = float(sys.argv[5])
sys.path.insert(0, sys.argv[6])
import readhints_stats as rs
schedule = sys.argv[7]
steal_max = float(sys.argv[8])
fine = sys.argv[9] != ""  # TIMELINE_INTERVAL set: window rates from the client's timeline
rows = [json.loads(l) for l in open(f"{out}/samples.jsonl")]
smp = [r for r in rows if "nodes" in r]
t0 = next((r["t0"] for r in rows if "t0" in r), None)
client_rate = {}
if fine:
    points = json.load(open(f"{out}/timeline.json"))
    client_rate = {k + 1: r for k, (_, r) in enumerate(rs.timeline_windows(points, t0, window, windows, skip, schedule))}
# The rate the cost is computed from: n1's served requests from the 1-s samples, or the client's
# completed operations from its timeline (finer, for windows of a few seconds).
RATE = "client_requests_per_s" if fine else "requests_per_s"
def rate(a, b, f):
    dt = b["t"] - a["t"]
    return f(b) - f(a), dt
wins = []
for k in range(0, windows + 1):
    lo, hi = k * window + (skip if k else window // 2), (k + 1) * window
    ws = [r for r in smp if lo <= r["t"] <= hi]
    if len(ws) < 2:
        continue
    a, b = ws[0], ws[-1]
    dt = b["t"] - a["t"]
    g = lambda r, i, n: r["nodes"][i].get(n, float("nan"))
    reqs = (g(b, 0, "shoal_grpc_requests_total") - g(a, 0, "shoal_grpc_requests_total")) / dt
    cpu = [(b["cpu"][i] - a["cpu"][i]) / dt for i in range(4)]
    hits = g(b, 0, "shoal_storage_block_cache_hits_total") - g(a, 0, "shoal_storage_block_cache_hits_total")
    miss = g(b, 0, "shoal_storage_block_cache_misses_total") - g(a, 0, "shoal_storage_block_cache_misses_total")
    w = {"window": k, "hints": "on" if rs.window_on(k, schedule) else "off", "from_s": lo, "to_s": hi, "requests_per_s": reqs,
         "client_requests_per_s": client_rate.get(k, float("nan")),
         "cpu_cores": {"n1": cpu[0], "n2": cpu[1], "n3": cpu[2], "client": cpu[3]},
         "n1_cpu_us_per_request": 1e6 * cpu[0] / reqs if reqs else float("nan"),
         "n1_hit_ratio": hits / (hits + miss) if hits + miss else float("nan"),
         "recorded_per_s": (g(b, 0, "shoal_hints_recorded_total") - g(a, 0, "shoal_hints_recorded_total")) / dt,
         "sent_bytes_per_s": (g(b, 0, "shoal_hints_sent_bytes_total") - g(a, 0, "shoal_hints_sent_bytes_total")) / dt,
         "sampled_out_per_s": (g(b, 0, "shoal_hints_dropped_total:sampled") - g(a, 0, "shoal_hints_dropped_total:sampled")) / dt,
         "withheld_per_s": (g(b, 0, "shoal_hints_dropped_total:sender_one_off") - g(a, 0, "shoal_hints_dropped_total:sender_one_off")) / dt,
         "n1_capture_fraction": st.mean(r["nodes"][0].get("shoal_hints_capture_fraction", float("nan")) for r in ws),
         "n1_capture_load": st.mean(r["nodes"][0].get("shoal_hints_capture_load", float("nan")) for r in ws),
         "replay_hit_ratio": [(lambda h, m: h / (h + m) if h + m else float("nan"))(
             g(b, i, "shoal_hints_replay_cache_bytes_total:hit") - g(a, i, "shoal_hints_replay_cache_bytes_total:hit"),
             g(b, i, "shoal_hints_replay_cache_bytes_total:miss") - g(a, i, "shoal_hints_replay_cache_bytes_total:miss")) for i in (1, 2)],
         "applied_per_s": [(g(b, i, "shoal_hints_applied_total") - g(a, i, "shoal_hints_applied_total")) / dt for i in (1, 2)],
         "follower_fraction": [[round(r["nodes"][i].get("shoal_hints_apply_fraction", float("nan")), 3) for r in ws] for i in (1, 2)],
         "follower_load": [st.mean(r["nodes"][i].get("shoal_hints_load", float("nan")) for r in ws) for i in (1, 2)],
         "follower_paused_s": [sum(r["nodes"][i].get("shoal_hints_paused", 0) for r in ws) for i in (1, 2)],
         "compactions": [g(b, i, "shoal_storage_compactions_total") - g(a, i, "shoal_storage_compactions_total") for i in range(3)],
         "loadavg": st.mean(r["loadavg"] for r in ws)}
    # Run-queue wait (seconds runnable, not running) per request, and the share of the window's CPU
    # time that the host stole (or that was iowait), over all cores and per core.
    runq = [(b["runq"][i] - a["runq"][i]) / dt for i in range(4)]
    w["runq_cores"] = dict(zip(("n1", "n2", "n3", "client"), runq))
    w["runq_us_per_request"] = {n: 1e6 * v / reqs if reqs else float("nan") for n, v in w["runq_cores"].items()}
    # With one client thread a request's wall time is 1 / (req/s): the client's wait as a share of it.
    w["client_runq_share_of_wall"] = runq[3]
    def share(cpu, field):
        d = [x - y for x, y in zip(b["stat"][cpu], a["stat"][cpu])]
        return d[field] / sum(d) if sum(d) else float("nan")
    w["steal_share"] = share("cpu", 7)
    w["iowait_share"] = share("cpu", 4)
    w["steal_share_per_cpu"] = {c: share(c, 7) for c in sorted(b["stat"]) if c != "cpu"}
    wins.append(w)
toggled = [w for w in wins if w["window"] > 0]
on = [w for w in toggled if w["hints"] == "on"]
off = [w for w in toggled if w["hints"] == "off"]
mean = lambda ws, f: st.mean(f(w) for w in ws) if ws else float("nan")
# Each on window against the mean of its two neighbours (off), so a drift over the run cancels.
pairs = []
for w in on:
    nb = [x for x in off if abs(x["window"] - w["window"]) == 1]
    if nb:
        pairs.append(w[RATE] / st.mean(x[RATE] for x in nb))
paired = rs.paired_cost(*rs.pair_windows([(w["hints"] == "on", w[RATE]) for w in toggled]))
# The same over the pairs in which neither window lost more than steal_max of the machine's CPU time
# to the host (a window's rate of 0 drops its pair): session 22's outliers were the windows the host
# stole 11-24 % of, not hints' own cost (docs/bench-read-hints.md).
paired_low_steal = rs.paired_cost(*rs.pair_windows([(w["hints"] == "on", w[RATE] if w["steal_share"] < steal_max else 0)
                                                    for w in toggled]))
res = {"schedule": schedule, "rate": RATE, "t0": t0, "paired": paired, "windows": wins, "on_requests_per_s": mean(on, lambda w: w["requests_per_s"]),
       "off_requests_per_s": mean(off, lambda w: w["requests_per_s"]),
       "on_client_requests_per_s": mean(on, lambda w: w["client_requests_per_s"]),
       "off_client_requests_per_s": mean(off, lambda w: w["client_requests_per_s"]),
       "on_n1_cpu_us_per_request": mean(on, lambda w: w["n1_cpu_us_per_request"]),
       "off_n1_cpu_us_per_request": mean(off, lambda w: w["n1_cpu_us_per_request"]),
       "pair_ratios": pairs, "steal_max": steal_max, "paired_low_steal": paired_low_steal}
res["ratio_on_off"] = res["on_requests_per_s"] / res["off_requests_per_s"]
for name, ws in (("on", on), ("off", off)):
    res[f"{name}_runq_us_per_request"] = {n: mean(ws, lambda w: w["runq_us_per_request"][n]) for n in ("client", "n1", "n2", "n3")}
    res[f"{name}_client_runq_share_of_wall"] = mean(ws, lambda w: w["client_runq_share_of_wall"])
    res[f"{name}_steal_share"] = mean(ws, lambda w: w["steal_share"])
    res[f"{name}_iowait_share"] = mean(ws, lambda w: w["iowait_share"])
json.dump(res, open(f"{out}/result.json", "w"), indent=1)
print(f"{'win':>3} {'hints':>5} {'req/s':>8} {'n1 cpu':>6} {'n2':>5} {'n3':>5} {'client':>6} {'us/req':>6} {'n1 hit':>6} "
      f"{'rec/s':>7} {'kB/s':>6} {'applied/s n2,n3':>16} {'fraction n2 (min-max)':>22} {'load n2,n3':>10} {'loadavg':>7} {'compactions':>11}")
for w in wins:
    fr = w["follower_fraction"][0]
    fr = [x for x in fr if not math.isnan(x)] or [float("nan")]
    print(f"{w['window']:>3} {w['hints']:>5} {w['requests_per_s']:>8.0f} {w['cpu_cores']['n1']:>6.2f} {w['cpu_cores']['n2']:>5.2f} "
          f"{w['cpu_cores']['n3']:>5.2f} {w['cpu_cores']['client']:>6.2f} {w['n1_cpu_us_per_request']:>6.1f} {w['n1_hit_ratio']:>6.3f} "
          f"{w['recorded_per_s']:>7.0f} {w['sent_bytes_per_s'] / 1e3:>6.1f} {w['applied_per_s'][0]:>7.0f},{w['applied_per_s'][1]:>7.0f} "
          f"{min(fr):>10.2f}-{max(fr):<10.2f} {w['follower_load'][0]:>4.2f},{w['follower_load'][1]:>4.2f} {w['loadavg']:>7.2f} "
          f"{','.join(f'{c:.0f}' for c in w['compactions']):>11}")
print(f"hints on: {res['on_requests_per_s']:.0f} req/s, off: {res['off_requests_per_s']:.0f} req/s, "
      f"on/off = {res['ratio_on_off']:.4f} ({100 * (res['ratio_on_off'] - 1):+.2f} %); "
      f"each on window / its off neighbours: {', '.join(f'{p:.3f}' for p in pairs)}; "
      f"n1 CPU per request on {res['on_n1_cpu_us_per_request']:.1f} us, off {res['off_n1_cpu_us_per_request']:.1f} us")
if paired:
    src = "the client's timeline" if fine else "n1's served requests"
    print(f"pairs of windows (1-2, 3-4, ...), rates from {src}: {rs.describe(paired)}")
    if paired_low_steal:
        print(f"pairs without a window whose steal reached {100 * steal_max:.0f} %: {rs.describe(paired_low_steal)}")
    cpu_pairs = rs.pair_windows([(w["hints"] == "on", 1 / w["n1_cpu_us_per_request"]) for w in toggled])
    if cpu_pairs[0]:
        print(f"n1 CPU per request, pairs: {rs.describe(rs.paired_cost(*cpu_pairs)).replace('cost 1 - on/off', 'extra CPU per request 1 - off/on')}")
n1 = mean(toggled, lambda w: w["cpu_cores"]["n1"])
other = max(w["cpu_cores"]["n2"] + w["cpu_cores"]["n3"] + w["cpu_cores"]["client"] for w in toggled)
onw = [w for w in on if w["recorded_per_s"] > 0]
if onw:
    print(f"hints on, n1: served {mean(onw, lambda w: w['requests_per_s']):.0f} req/s, recorded {mean(onw, lambda w: w['recorded_per_s']):.0f}/s, "
          f"sampled out {mean(onw, lambda w: w['sampled_out_per_s']):.0f}/s (capture fraction {mean(onw, lambda w: w['n1_capture_fraction']):.2f}, "
          f"capture load {mean(onw, lambda w: w['n1_capture_load']):.2f}), one-offs withheld {mean(onw, lambda w: w['withheld_per_s']):.0f}/s, "
          f"sent {mean(onw, lambda w: w['sent_bytes_per_s']) / 1e3:.1f} kB/s = "
          f"{mean(onw, lambda w: w['sent_bytes_per_s'] / w['requests_per_s']):.1f} B per served request "
          f"({mean(onw, lambda w: w['sent_bytes_per_s'] / w['recorded_per_s']):.1f} B per recorded read); "
          f"followers applied {mean(onw, lambda w: w['applied_per_s'][0]):.0f},{mean(onw, lambda w: w['applied_per_s'][1]):.0f}/s, "
          f"replay hit ratio {mean(onw, lambda w: w['replay_hit_ratio'][0]):.3f},{mean(onw, lambda w: w['replay_hit_ratio'][1]):.3f}")
print()
print(f"{'win':>3} {'hints':>5} {'req/s':>8} {'run-queue wait us/req: client':>30} {'n1':>6} {'n2':>6} {'n3':>6} "
      f"{'client wait/wall':>16} {'steal %':>7} {'per cpu %':>11} {'iowait %':>8}")
for w in wins:
    q = w["runq_us_per_request"]
    print(f"{w['window']:>3} {w['hints']:>5} {w['requests_per_s']:>8.0f} {q['client']:>30.1f} {q['n1']:>6.1f} {q['n2']:>6.1f} "
          f"{q['n3']:>6.1f} {100 * w['client_runq_share_of_wall']:>15.1f}% {100 * w['steal_share']:>7.2f} "
          f"{','.join(f'{100 * v:.1f}' for v in w['steal_share_per_cpu'].values()):>11} {100 * w['iowait_share']:>8.2f}")
for name in ("on", "off"):
    q = res[f"{name}_runq_us_per_request"]
    print(f"hints {name:>3}, means: run-queue wait per request client {q['client']:.1f} us "
          f"({100 * res[f'{name}_client_runq_share_of_wall']:.1f} % of its wall time), n1 {q['n1']:.1f} us, "
          f"n2 {q['n2']:.1f} us, n3 {q['n3']:.1f} us; steal {100 * res[f'{name}_steal_share']:.2f} %, "
          f"iowait {100 * res[f'{name}_iowait_share']:.2f} % of the machine's CPU time")
print(f"saturation: n1 used {n1:.2f} of its {quota:g} cores; the other core's busiest window: {other:.2f} cores "
      f"(n2 + n3 + client; near 1 means the client's core, not n1, may be the bottleneck)")
PY
echo "$(date -u +%T) done; load average $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT"
