#!/usr/bin/env python3
"""Pool join runs (incremental against parallel) from several reports, with the ratio's uncertainty.

`shoal bench pool` already gives each variant's mean, sd, min and max of every figure, and the SLO
windows against one common threshold (*_common); use it for those. This script adds only what it
lacks: the runs taken as side-by-side pairs, and the goals' ratios with intervals over the pairs.

Each report.json of `shoal bench scenario join… --variants incremental,parallel [--repeat N]` holds
its runs in order; the k-th incremental run and the k-th parallel run of a report make a pair (they
ran side by side, one after the other). For every run it prints the issue's score (1-s windows whose
p99 is over the threshold, from the join's start to its end, and their summed excess), the chapter's
2-s mean score, and the join's timings; then, over all pairs, the means per strategy and the ratios
parallel / incremental of the windows and of the excess (issue 10's goals: >= 2x and >= 4x), with a
95 % bootstrap interval over the pairs (resampling pairs, ratio of the means, seed fixed).

    python3 scripts/join_pool.py /tmp/a/report.json /tmp/b/report.json ...
    python3 scripts/join_pool.py --threshold 190 REPORT...   # one threshold (ms) for every run
                                                           # instead of each run's own
"""
import argparse
import json
import random
import sys


def windows_over(series, thr, start, end):
    n, excess = 0, 0.0
    for p in series:
        mid = p["t"] - 0.5
        if start <= mid < end and p["p99_ms"] > thr:
            n += 1
            excess += p["p99_ms"] - thr
    return n, excess


def run_row(run, common):
    j = run["join"]
    start, end = j["join_start_s"], j["join_start_s"] + j["join_s"]
    for e in run.get("events", []):
        if e.get("task") and "join" in e.get("label", ""):
            end = e["end_t"]  # where the scenario ends the join's window (the event's return)
            break
    thr = common if common is not None else j["slo_threshold_ms"]
    win, exc = windows_over(run["series"], thr, start, end)
    if common is None and (win, round(exc)) != (j["violating_windows"], round(j["excess_ms"])):
        # The recount must agree with the scenario's own (bench/scenario/join.go, windowsOver).
        print(f"warning: {run.get('variant')} at {start:.1f} s: recounted {win} windows / {exc:.0f} ms, "
              f"the report says {j['violating_windows']} / {j['excess_ms']:.0f}", file=sys.stderr)
    return {"variant": run.get("variant", ""), "at": start, "thr": thr, "win": win, "exc": exc,
            "chw": j.get("chapter_violations", 0), "chwin": j.get("chapter_windows", 0),
            "chexc": j.get("chapter_excess_ms", 0.0), "ratio": j.get("throughput_ratio", 0.0),
            "first": j.get("first_served_s", 0.0), "full": j.get("full_share_s", 0.0), "join": j["join_s"]}


def ratio_of_means(pairs, key):
    inc = sum(p[0][key] for p in pairs) / len(pairs)
    par = sum(p[1][key] for p in pairs) / len(pairs)
    return par / inc if inc > 0 else float("inf")


def bootstrap(pairs, key, n=10000):
    rng = random.Random(1)
    vals = sorted(ratio_of_means([rng.choice(pairs) for _ in pairs], key) for _ in range(n))
    return vals[int(0.025 * n)], vals[int(0.975 * n) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threshold", type=float, help="one SLO threshold (ms) for every run instead of each run's own")
    ap.add_argument("reports", nargs="+", metavar="REPORT.json")
    opts = ap.parse_args()
    args, common = opts.reports, opts.threshold
    pairs = []
    print(f"{'report':28} {'variant':12} {'join at':>7} {'thr ms':>6} {'1-s win':>7} {'excess':>7} "
          f"{'2-s win':>8} {'2-s exc':>7} {'dur/pre':>7} {'first':>5} {'full':>5} {'join':>5}")
    for path in args:
        with open(path) as f:
            rep = json.load(f)
        rows = {"incremental": [], "parallel": []}
        for run in rep["runs"]:
            if not run.get("join"):
                continue
            r = run_row(run, common)
            rows.setdefault(r["variant"], []).append(r)
            print(f"{path[-28:]:28} {r['variant']:12} {r['at']:7.1f} {r['thr']:6.1f} {r['win']:7d} {r['exc']:7.0f} "
                  f"{r['chw']:>3}/{r['chwin']:<4} {r['chexc']:7.1f} {r['ratio']:7.3f} {r['first']:5.1f} {r['full']:5.1f} {r['join']:5.1f}")
        pairs += list(zip(rows["incremental"], rows["parallel"]))
    if not pairs:
        sys.exit("no incremental/parallel pair in the reports")
    print(f"\n{len(pairs)} pairs" + (f", one threshold {common} ms" if common is not None else ", each run's own threshold"))
    for key, what in (("win", "1-s p99 windows"), ("exc", "1-s excess ms"), ("chw", "2-s mean windows"), ("chexc", "2-s excess ms")):
        inc = sum(p[0][key] for p in pairs) / len(pairs)
        par = sum(p[1][key] for p in pairs) / len(pairs)
        lo, hi = bootstrap(pairs, key)
        print(f"  {what:17} incremental {inc:7.1f}  parallel {par:7.1f}  parallel/incremental {ratio_of_means(pairs, key):5.2f}x [95 % {lo:.2f}, {hi:.2f}]")
    for key, what in (("ratio", "throughput during/before"), ("join", "join s"), ("first", "first range s")):
        inc = sum(p[0][key] for p in pairs) / len(pairs)
        par = sum(p[1][key] for p in pairs) / len(pairs)
        print(f"  {what:24} incremental {inc:6.2f}  parallel {par:6.2f}")


if __name__ == "__main__":
    main()
