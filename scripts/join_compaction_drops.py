#!/usr/bin/env python3
"""A join run's hit-ratio drops and SLO-violating seconds against the old nodes' compactions.

Reports written since session 21 list every compaction the nodes finished (`compactions`: node,
begin/end second, reason, levels, bytes). For every run of the given report.json files:
  - each old node's (n1-n3) compactions after the warm-up: the node's own reads' hit ratio over the
    3 s before its end against the lowest over the second it ends and the 2 after ("drop");
  - the seconds in which an old node's hit ratio is DROP or more below its median over the run after
    30 s, and how many of them fall within 2.5 s after a compaction of that node ended;
  - the 1-s p99 windows over the run's SLO threshold during the join, and how many fall within 2.5 s
    after an old node's compaction ended (against how many of the join's seconds do: chance).
A compaction writes new tables and the block cache holds none of their blocks, so the reads of the
key span it rewrote miss until they load them again (docs/bench-join.md, session 21).

    python3 scripts/join_compaction_drops.py /tmp/js/report.json [more reports...]
    python3 scripts/join_compaction_drops.py --threshold 190 /tmp/a/report.json /tmp/b/report.json
        # one SLO threshold (ms) for every run instead of each run's own: runs whose steady states
        # differ are then compared on the same bar
"""
import json
import statistics as st
import sys

DROP = 0.05
AFTER = 2.5  # seconds after a compaction's end in which a drop or a violation is counted as its


def second(series, t):
    """The series point of the second [t, t+1)."""
    for p in series:
        if t <= p["t"] - 0.5 < t + 1:
            return p
    return None


def main():
    args, common = sys.argv[1:], None
    if args[:1] == ["--threshold"] and len(args) > 1:
        common, args = float(args[1]), args[2:]
    if not args:
        sys.exit(__doc__)
    for f in args:
        for run in json.load(open(f))["runs"]:
            series, comps = run["series"], run.get("compactions")
            if comps is None:
                print(f"{f} {run.get('variant', '')}: no compactions in the report (written before session 21?)")
                continue
            j = run.get("join") or {}
            t0, thr = j.get("join_start_s", 0), j.get("slo_threshold_ms", float("inf"))
            if common is not None:
                thr = common
            t1 = t0 + j.get("join_s", 0)
            old = [c for c in comps if c["node"] <= 3 and c["end_s"] >= 30 and not c.get("error")]
            print(f"{f} {run.get('variant', '')}: {len(old)} compactions on n1-n3 after 30 s "
                  f"(join {t0:.1f}-{t1:.1f} s, SLO {thr:.1f} ms)")
            drops = []
            for c in old:
                n, e = c["node"] - 1, int(c["end_s"])
                before = [p["node_served_hit_ratio"][n] for k in (2, 3, 4) if (p := second(series, e - k))]
                after = [p["node_served_hit_ratio"][n] for k in (0, 1, 2) if (p := second(series, e + k))]
                before, after = [x for x in before if x >= 0], [x for x in after if x >= 0]
                if before and after:
                    d = st.mean(before) - min(after)
                    drops.append(d)
                    print(f"  n{n + 1} {c['begin_s']:6.1f}-{c['end_s']:6.1f} s {c['reason']:<12} "
                          f"L{c['from_level']}->L{c['to_level']} {c['input_bytes'] / 1e6:5.1f} -> "
                          f"{c['output_bytes'] / 1e6:5.1f} MB: hit ratio drop {d:+.3f}")
            if drops:
                print(f"  drop median {st.median(drops):.3f}; >= {DROP} after {sum(d >= DROP for d in drops)} of {len(drops)}")

            def near_end(t, nodes):
                return any(c["node"] - 1 in nodes and t - AFTER <= c["end_s"] <= t + 1 for c in old)

            meds = []
            for n in range(3):
                xs = [p["node_served_hit_ratio"][n] for p in series if p["t"] > 30 and p["node_served_hit_ratio"][n] >= 0]
                meds.append(st.median(xs) if xs else 0)
            low = [(p["t"] - 0.5, n) for p in series for n in range(3)
                   if p["t"] > 30 and 0 <= p["node_served_hit_ratio"][n] <= meds[n] - DROP]
            print(f"  seconds with a node's hit ratio >= {DROP} below its median: {len(low)}, "
                  f"{sum(near_end(t, {n}) for t, n in low)} within {AFTER} s after that node's compaction ended")
            run_s = [p["t"] - 0.5 for p in series if p["t"] > 30]
            after_end = [t for t in run_s if near_end(t, {0, 1, 2})]
            others = [t for t in run_s if not near_end(t, {0, 1, 2})]
            bad = {p["t"] - 0.5 for p in series if p["p99_ms"] > thr}
            if run_s:
                excess = sum(p["p99_ms"] - thr for p in series if p["t"] > 30 and p["p99_ms"] > thr)
                print(f"  after 30 s: {len(bad & set(run_s))} of {len(run_s)} seconds violate the SLO (excess {excess:.0f} ms); "
                      f"{sum(t in bad for t in after_end)} of {len(after_end)} seconds within {AFTER} s after an old "
                      f"node's compaction ended violate the SLO, {sum(t in bad for t in others)} of the other {len(others)}")
            ds = run.get("decisions") or []
            if ds:
                by = {}
                for d in ds:
                    by[(d["policy"], d["status"])] = by.get((d["policy"], d["status"]), 0) + 1
                print("  decisions of the variant's policies: " + ", ".join(f"{k[0]} {k[1]} {v}" for k, v in sorted(by.items())))
            if t1 > t0:
                during = [p["t"] - 0.5 for p in series if t0 <= p["t"] - 0.5 < t1]
                viol = [p["t"] - 0.5 for p in series if t0 <= p["t"] - 0.5 < t1 and p["p99_ms"] > thr]
                print(f"  violating seconds during the join: {len(viol)}, "
                      f"{sum(near_end(t, {0, 1, 2}) for t in viol)} within {AFTER} s after an old node's compaction ended "
                      f"(such seconds are {sum(near_end(t, {0, 1, 2}) for t in during)} of the join's {len(during)})")


if __name__ == "__main__":
    main()
