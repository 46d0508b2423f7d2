#!/usr/bin/env python3
"""Recount a join scenario's throughput bins over a fixed window, for runs whose join never finished.

`shoal bench scenario join-long --variants no-join` (a control: the fourth node starts with the join
policy off) has no finished join, so its report measures "the join" to the end of the run. This
prints, for every run of the given report.json files, the throughput in WINDOW seconds from the
node's start (or the run's own join, when it finished) against the 15 s before it, in 10-s bins as
JoinReport does, with the old nodes' compacting node-seconds and their own reads' hit ratio per bin.
Then, per variant, the worst bin of each run with their mean and a 95 % Student's t interval.

    python3 scripts/join_window.py 37 /tmp/jl/rep-1/report.json /tmp/jl/rep-2/report.json
"""
import json
import math
import os
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readhints_stats import t975  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    window = float(sys.argv[1])
    worst = {}
    for f in sys.argv[2:]:
        rep = json.load(open(f))
        for r in rep["runs"]:
            j = r.get("join")
            if not j:
                continue
            t0 = j["join_start_s"]
            t1 = t0 + (j["join_s"] if j.get("done") else window)
            series = r["series"]

            def within(p, a, b):
                return a <= p["t"] - 0.5 < b

            ref = st.mean(p["ops"] for p in series if within(p, t0 - 15, t0))
            bins, b = [], t0
            while b < t1:
                ps = [p for p in series if within(p, b, min(b + 10, t1))]
                if len(ps) >= 5 or (ps and not bins):
                    comp = sum(1 for p in ps for c in p.get("compacting", [])[:3] if c > 0)
                    hits = [x for p in ps for x in p.get("node_served_hit_ratio", [])[:3] if x >= 0]
                    bins.append((st.mean(p["ops"] for p in ps) / ref - 1, comp, st.mean(hits) if hits else float("nan")))
                b += 10
            during = st.mean(p["ops"] for p in series if within(p, t0, t1))
            print(f"{f} {r.get('variant') or ''}: {t0:.0f}-{t1:.0f} s, {ref:.0f} ops/s before, during/before {during / ref:.3f}; "
                  "bins (compacting node-s, own-reads hit ratio): "
                  + " ".join(f"{d * 100:+.1f}% ({c}, {h:.2f})" for d, c, h in bins))
            worst.setdefault(r.get("variant") or "", []).append(min(d for d, _, _ in bins))
    for v, ws in sorted(worst.items()):
        line = f"{v}: worst bin of {len(ws)} runs " + ", ".join(f"{w * 100:+.1f}%" for w in ws)
        if len(ws) > 1:
            m, h = st.mean(ws), t975(len(ws) - 1) * st.stdev(ws) / math.sqrt(len(ws))
            line += f"; mean {m * 100:+.1f}%, 95 % CI [{(m - h) * 100:+.1f}%, {(m + h) * 100:+.1f}%]"
        print(line)


if __name__ == "__main__":
    main()
