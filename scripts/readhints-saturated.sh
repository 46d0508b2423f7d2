#!/usr/bin/env bash
# The steady-state cost of read hints on a serving node whose followers run on other hardware: the
# one thing `shoal bench scenario read-hints-overhead` cannot do in one process is place its nodes.
# This starts three `shoal start` processes on loopback, n1 pinned to LEADER_CPU and capped at
# LEADER_QUOTA cores (cgroup v1 cpu quota; empty: no cap), n2 and n3 on OTHER_CPU in cgroups that
# yield their core to the client (FOLLOWER_IDLE=1: cpu.idle; or cpu.shares FOLLOWER_SHARES), then
# runs the scenario against them from OTHER_CPU: it loads, gathers every leadership on one node
# (rebalance is off from the start, so n1, which bootstrapped), switches hints in ABBA pairs of
# windows and prints their cost with a 95 % confidence interval, over all pairs and over the pairs
# the host stole little CPU from. OUT/report.json holds every window; `shoal bench pool` pools runs.
#
#   scripts/readhints-saturated.sh                                       # a saturated, capped n1
#   LEADER_QUOTA= THREADS=1 FOLLOWER_IDLE=1 PAIRS=100 WINDOW=4s SKIP=2s SWITCH_INTERVAL=100ms \
#     FOLLOWER_FRACTION=0.001 scripts/readhints-saturated.sh             # the serving node's own cost
#
# Needs taskset, cgroup v1's cpu controller (for the caps) and two cores. The nodes use the real
# disk and the OS page cache (`shoal start` has no emulated disks).
set -euo pipefail

BIN=$(readlink -f "${BIN:-bin/shoal}")
OUT=${OUT:-/tmp/readhints-saturated}
CACHE=${CACHE:-32MiB}
RECORDS=${RECORDS:-160000}
THREADS=${THREADS:-64}
PAIRS=${PAIRS:-30} WINDOW=${WINDOW:-12s} SKIP=${SKIP:-4s}
LEADER_CPU=${LEADER_CPU:-0} OTHER_CPU=${OTHER_CPU:-1}
LEADER_QUOTA=${LEADER_QUOTA-0.5}
FOLLOWER_IDLE=${FOLLOWER_IDLE:-} FOLLOWER_SHARES=${FOLLOWER_SHARES:-}
FOLLOWER_FRACTION=${FOLLOWER_FRACTION:-}  # n2 and n3 replay only this fraction of the hints they receive
SWITCH_INTERVAL=${SWITCH_INTERVAL:-}      # how often the nodes read the read_hints switch (default 2s)
BASE_PORT=${BASE_PORT:-27300}
EXTRA_NODE_FLAGS=${EXTRA_NODE_FLAGS:-}

rm -rf "$OUT"
mkdir -p "$OUT/data"
PIDS=() CGROUPS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for d in "${CGROUPS[@]}"; do rmdir "$d" 2>/dev/null || true; done
  rm -rf "$OUT/data"
}
trap cleanup EXIT

# cgroup NAME SETTING=VALUE...: a cgroup-v1 cpu group with the settings; prints its directory.
cgroup() {
  local d=/sys/fs/cgroup/cpu/shoal-readhints-$$-$1
  shift
  mkdir "$d"
  CGROUPS+=("$d")
  for kv in "$@"; do echo "${kv#*=}" >"$d/${kv%%=*}"; done
  echo "$d"
}

# start I CPU CGROUP FLAGS...: node I on CPU, in CGROUP (may be empty), ready within a minute.
start() {
  local i=$1 cpu=$2 cg=$3
  shift 3
  CG="$cg" taskset -c "$cpu" sh -c '[ -z "$CG" ] || echo $$ >"$CG/cgroup.procs"; exec "$@"' sh "$BIN" start \
    --data-dir "$OUT/data/n$i" --listen "127.0.0.1:$((BASE_PORT + i))" --http "127.0.0.1:$((BASE_PORT + 10 + i))" \
    --cache-size "$CACHE" ${SWITCH_INTERVAL:+--read-hints-switch-interval "$SWITCH_INTERVAL"} $EXTRA_NODE_FLAGS "$@" >"$OUT/n$i.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 120); do
    grep -q " ready " "$OUT/n$i.log" && return 0
    sleep 0.5
  done
  echo "n$i not ready after 60 s:"; tail -20 "$OUT/n$i.log"; exit 1
}

LEADER_CG= FOLLOWER_CG=
[ -z "$LEADER_QUOTA" ] || LEADER_CG=$(cgroup n1 cpu.cfs_period_us=20000 cpu.cfs_quota_us="$(awk -v q="$LEADER_QUOTA" 'BEGIN { printf "%d", q * 20000 }')")
if [ -n "$FOLLOWER_IDLE$FOLLOWER_SHARES" ]; then
  FOLLOWER_CG=$(cgroup followers ${FOLLOWER_IDLE:+cpu.idle=1} ${FOLLOWER_SHARES:+cpu.shares=$FOLLOWER_SHARES})
fi
start 1 "$LEADER_CPU" "$LEADER_CG" --bootstrap
HOSTS=127.0.0.1:$((BASE_PORT + 1))
for p in rebalance load_split merge shed_leadership; do "$BIN" --host "$HOSTS" admin policy set "$p" off >/dev/null; done
for i in 2 3; do
  start "$i" "$OTHER_CPU" "$FOLLOWER_CG" --join "127.0.0.1:$((BASE_PORT + 1))" ${FOLLOWER_FRACTION:+--read-hints-fraction "$FOLLOWER_FRACTION"}
  HOSTS=$HOSTS,127.0.0.1:$((BASE_PORT + i))
done
echo "$(date -u +%T) nodes up: n1 on cpu $LEADER_CPU (${LEADER_QUOTA:-no} core cap), n2 and n3 on cpu $OTHER_CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)"
taskset -c "$OTHER_CPU" "$BIN" bench scenario read-hints-overhead --hosts "$HOSTS" --records "$RECORDS" --threads "$THREADS" \
  --pairs "$PAIRS" --window "$WINDOW" --skip "$SKIP" --out "$OUT"
