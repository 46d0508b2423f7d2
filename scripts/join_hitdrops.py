#!/usr/bin/env python3
"""Where a join's SLO-violating seconds fall against the old nodes' own hit-ratio drops.

For every run of the given report.json files (join scenarios): the 1-s p99 windows over the run's
SLO threshold during the join, how many fall in a second where an old node's own reads' hit ratio
is 0.05 or more below its median over the join (a "drop"), and how many such seconds there are.
Then, per node, each burst of snapshot streaming (the first second with stream bytes after one
without): the node's hit ratio over the 3 s before against the lowest over the burst and the 3 s
after. docs/bench-join.md, session 20.

    python3 scripts/join_hitdrops.py /tmp/js/rep-*/report.json
"""
import json
import statistics as st
import sys

DROP = 0.05


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for f in sys.argv[1:]:
        for run in json.load(open(f))["runs"]:
            j = run.get("join")
            if not j:
                continue
            t0, thr = j["join_start_s"], j["slo_threshold_ms"]
            t1 = t0 + j["join_s"]
            series = run["series"]
            during = [p for p in series if t0 <= p["t"] - 0.5 < t1]
            old = range(3)
            med = [st.median([p["node_served_hit_ratio"][n] for p in during]) for n in old]

            def drop(p):
                return any(0 <= p["node_served_hit_ratio"][n] <= med[n] - DROP for n in old)

            viol = [p for p in during if p["p99_ms"] > thr]
            print(f"{f} {run['variant']}: join at {t0:.0f} s, {len(viol)} violating s, "
                  f"{sum(1 for p in viol if drop(p))} with a drop; drop seconds "
                  f"{sum(1 for p in during if drop(p))} of {len(during)}")
            drops = []
            for i, p in enumerate(series):
                if not t0 <= p["t"] - 0.5 < t1:
                    continue
                for n in old:
                    if p["node_stream_bytes"][n] == 0 or (i > 0 and series[i - 1]["node_stream_bytes"][n] > 0):
                        continue
                    k = i
                    while k < len(series) and series[k]["node_stream_bytes"][n] > 0:
                        k += 1
                    before = [series[b]["node_served_hit_ratio"][n] for b in range(max(i - 3, 0), i)]
                    after = [series[b]["node_served_hit_ratio"][n] for b in range(i, min(k + 3, len(series)))]
                    before, after = [x for x in before if x >= 0], [x for x in after if x >= 0]
                    if before and after:
                        drops.append(sum(before) / len(before) - min(after))
            if drops:
                print(f"  {len(drops)} streaming bursts: drop median {st.median(drops):.3f}, "
                      f"max {max(drops):.3f}, >= {DROP} in {sum(1 for d in drops if d >= DROP)}")


if __name__ == "__main__":
    main()
