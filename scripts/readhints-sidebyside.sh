#!/usr/bin/env bash
# Issue 9: the cost of read hints on a saturated node, measured side by side.
#
# scripts/readhints-saturated.sh compares windows of one cluster with hints on and off, one after
# the other; on this shared VM the serving node's CPU per request swings by up to 2x between windows
# for reasons outside the run, so a pair of windows varies by ~15 % (sd) and 70 pairs left a 95 %
# interval 7 points wide. Here two identical clusters run that script at once, their windows
# aligned to the second: in every window one cluster has hints on and the other off (schedules alt
# and alt-inverted), swapping each window. Both serving nodes are pinned to the same core, each
# capped at LEADER_QUOTA cores (default 0.25; together half of the core), so a change in the
# machine's speed reaches both in the same window and cancels in their ratio; the clusters' own
# difference cancels over two windows (scripts/readhints_stats.py: side_by_side_pairs). The
# followers and both clients share the other core.
#
#   flock /tmp/bench.lock scripts/readhints-sidebyside.sh            # ~20 min; OUT=/tmp/readhints-sidebyside
#   BIN=/tmp/shoal OUT=/tmp/rsb WINDOW=12 WINDOWS=60 scripts/readhints-sidebyside.sh
#
# BIN_B=other-binary compares two builds instead of hints on and off: cluster a runs BIN, cluster b
# BIN_B, both on the same schedule (hints off, on, off, ...), and the analysis gives b's throughput and
# n1 CPU per request over a's, window by window (scripts/readhints_stats.py: window_ratios). The two
# clusters' own difference does not cancel within one run: run it again with the binaries swapped and
# take the geometric mean of the two ratios (b/a, then the inverse of the swapped run's).
#
# Every other setting (RECORDS, CACHE, THREADS, SKIP, SETTLE, DISTRIBUTION, EXTRA_NODE_FLAGS, ...)
# is passed through to both runs; OUT/a and OUT/b hold each run's own report (its on/off table
# compares its windows one after the other, as the single-cluster script does).
set -euo pipefail

SCRIPTS=$(dirname "$(readlink -f "$0")")
OUT=${OUT:-/tmp/readhints-sidebyside}
export BIN=$(readlink -f "${BIN:-bin/shoal}")
BIN_B=$(readlink -f "${BIN_B:-$BIN}")
SCHEDULE_B=alt-inverted
[ "$BIN_B" = "$BIN" ] || SCHEDULE_B=alt
export LEADER_QUOTA=${LEADER_QUOTA-0.25}
export WINDOW=${WINDOW:-12} WINDOWS=${WINDOWS:-60} SKIP=${SKIP:-5}
export BARRIER=$OUT/barrier PEERS=2
[ $((WINDOWS % 2)) -eq 0 ] || { echo "WINDOWS must be even (pairs of windows)"; exit 1; }
[ "$SKIP" -le $((WINDOW - 3)) ] || { echo "SKIP must leave at least 3 s of each window measured"; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$OUT/a BASE_PORT=27300 SCHEDULE=alt "$SCRIPTS/readhints-saturated.sh" >"$OUT/a.log" 2>&1 &
A=$!
BIN=$BIN_B OUT=$OUT/b BASE_PORT=27400 SCHEDULE=$SCHEDULE_B "$SCRIPTS/readhints-saturated.sh" >"$OUT/b.log" 2>&1 &
B=$!
trap 'kill -TERM $A $B 2>/dev/null || true; wait $A $B 2>/dev/null || true' INT TERM
if [ "$SCHEDULE_B" = alt ]; then
  echo "$(date -u +%T) clusters a ($BIN) and b ($BIN_B), both hints off, on, off, ... starting; logs in $OUT/a.log, $OUT/b.log"
else
  echo "$(date -u +%T) clusters a (hints off, on, off, ...) and b (on, off, on, ...) starting; logs in $OUT/a.log, $OUT/b.log"
fi
rc=0
wait "$A" || rc=$?
wait "$B" || rc=$?
[ "$rc" -eq 0 ] || { echo "a run failed (rc $rc):"; tail -n 5 "$OUT/a.log" "$OUT/b.log"; exit "$rc"; }

if [ "$SCHEDULE_B" = alt ]; then
  python3 - "$OUT" "$SCRIPTS" <<'PY'
import json, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import readhints_stats as rs
a, b, ks = rs.side_by_side_windows(out)
res = {"windows": ks}
for name, f in (("requests_per_s", lambda w: w["requests_per_s"]),
                ("n1_cpu_us_per_request", lambda w: w["n1_cpu_us_per_request"])):
    r = rs.window_ratios([f(a[k]) for k in ks], [f(b[k]) for k in ks])
    res[name] = r
    if r:
        print(f"b / a, {name}: geometric mean {r['ratio']:.4f}, 95 % CI [{r['ci95_low']:.4f}, {r['ci95_high']:.4f}], "
              f"{r['windows']} windows, sd of log ratio {r['sd_log']:.4f}")
json.dump(res, open(f"{out}/result.json", "w"), indent=1)
PY
  echo "$(date -u +%T) done; results in $OUT/result.json"
  exit 0
fi

python3 - "$OUT" "$SCRIPTS" <<'PY'
import json, statistics as st, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import readhints_stats as rs
a, b, ks = rs.side_by_side_windows(out)
print(f"{'win':>3} {'on':>2} {'a req/s':>8} {'b req/s':>8} {'on/off':>7} {'a us/req':>8} {'b us/req':>8} {'a cpu':>5} {'b cpu':>5}")
for k in ks:
    x, y = a[k], b[k]
    on, off = (x, y) if x["hints"] == "on" else (y, x)
    print(f"{k:>3} {'a' if x['hints'] == 'on' else 'b':>2} {x['requests_per_s']:>8.0f} {y['requests_per_s']:>8.0f} "
          f"{on['requests_per_s'] / off['requests_per_s']:>7.3f} {x['n1_cpu_us_per_request']:>8.1f} {y['n1_cpu_us_per_request']:>8.1f} "
          f"{x['cpu_cores']['n1']:>5.2f} {y['cpu_cores']['n1']:>5.2f}")
res = {"windows": ks}
seq = lambda d, f: [(d[k]["hints"] == "on", f(d[k])) for k in ks]
for name, f in (("requests_per_s", lambda w: w["requests_per_s"]),
                ("n1_requests_per_cpu_s", lambda w: 1 / w["n1_cpu_us_per_request"])):
    c = rs.paired_cost(*rs.side_by_side_pairs(seq(a, f), seq(b, f)))
    res[name] = c
    if c:
        print(f"side by side, {name}: {rs.describe(c)}")
# What the same windows give one cluster at a time (windows one after the other), for comparison.
for n, d in (("a", a), ("b", b)):
    c = rs.paired_cost(*rs.pair_windows(seq(d, lambda w: w["requests_per_s"])))
    res[f"{n}_alone"] = c
    if c:
        print(f"cluster {n} alone, windows one after the other: {rs.describe(c)}")
ra, rb = [a[k]["requests_per_s"] for k in ks], [b[k]["requests_per_s"] for k in ks]
if len(ks) > 2:
    res["rate_correlation"] = st.correlation(ra, rb)
    print(f"the two clusters' req/s over the windows: correlation {res['rate_correlation']:.2f} "
          f"(a {min(ra):.0f}-{max(ra):.0f}, b {min(rb):.0f}-{max(rb):.0f}): what side by side cancels")
json.dump(res, open(f"{out}/result.json", "w"), indent=1)
PY
echo "$(date -u +%T) done; results in $OUT/result.json"
