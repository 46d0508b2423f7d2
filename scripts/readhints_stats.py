"""Statistics of scripts/readhints-saturated.sh: the cost of read hints from windows toggled on and off.

The same computation as bench/scenario/readhints_stats.go (the in-process scenario
read-hints-overhead-abba); both are tested against the same figures (readhints_stats_test.py,
readhints_stats_test.go). Windows are numbered from 1 after a warm-up window 0 (hints on).

  alt:  off, on, off, on, ...        (each on window is also compared with its two off neighbours)
  abba: off, on | on, off | off, on | ...  pairs (1, 2), (3, 4), ...: a linear drift over the run
        cancels within every two pairs.
  alt-inverted: on, off, on, off, ...  the other cluster of a side-by-side run (scripts/readhints-sidebyside.sh):
        in every window one of two clusters has hints on and the other off.

The cost of a pair is 1 - on/off; the estimate is the pairs' mean with a 95 % Student's t interval,
and their median.
"""
import json
import math
import statistics

# Student's t 0.975 quantile for 1-30 degrees of freedom, then knots linear in 1/df.
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
_KNOTS = [(30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980), (math.inf, 1.960)]


def t975(df):
    """Student's t 0.975 quantile (two-sided 95 % interval) for df degrees of freedom."""
    if df < 1:
        return math.nan
    if df <= len(_T975):
        return _T975[df - 1]
    x = 1 / df
    for (dl, tl), (dh, th) in zip(_KNOTS, _KNOTS[1:]):
        if df <= dh:
            xl, xh = 1 / dl, 1 / dh
            return tl + (th - tl) * (xl - x) / (xl - xh)
    return 1.960


def window_on(k, schedule):
    """Whether hints are on in window k (0: the warm-up, on) of a schedule ("alt" or "abba")."""
    if k == 0:
        return True
    if schedule == "alt":
        return k % 2 == 0
    if schedule == "alt-inverted":
        return k % 2 == 1
    if schedule == "abba":
        p, h = (k - 1) // 2, (k - 1) % 2
        return (h == 1) == (p % 2 == 0)
    raise ValueError(f"unknown schedule {schedule!r}")


def pair_windows(wins):
    """Pairs of windows (1, 2), (3, 4), ... of [(on, rate), ...] (window 1 first) with one on and one
    off, as [(on_rate, off_rate)], and "abba" if the kept pairs alternate their first half, else "same"."""
    pairs, order, prev, n = [], "abba", None, 0
    for i in range(0, len(wins) - 1, 2):
        (a_on, a), (b_on, b) = wins[i], wins[i + 1]
        if a_on == b_on or not a > 0 or not b > 0:
            continue
        pairs.append((a, b) if a_on else (b, a))
        if n > 0 and a_on == prev:
            order = "same"
        prev, n = a_on, n + 1
    if n < 2:
        order = "same"
    return pairs, order


def timeline_windows(points, t0, window, windows, skip, schedule):
    """[(on, rate)] of windows 1..windows from a client timeline (bench ycsb --timeline: points with
    "unix_s", the end of each interval, and "ops"), for pair_windows. Window k runs from t0 + k window
    to t0 + (k + 1) window; its rate counts the points that lie wholly between skip seconds after its
    start and its end (a point's interval starts where the previous one ended), over the time they
    cover. A window without such a point has rate 0 (pair_windows drops its pair)."""
    out, prev = [], None
    spans = []
    for p in points:
        if p.get("phase", "run") != "run":
            continue
        if prev is not None:
            spans.append((prev, p["unix_s"], p["ops"]))
        prev = p["unix_s"]
    eps = 1e-3
    for k in range(1, windows + 1):
        lo, hi = t0 + k * window + skip, t0 + (k + 1) * window
        ops = dur = 0.0
        for a, b, n in spans:
            if a >= lo - eps and b <= hi + eps:
                ops, dur = ops + n, dur + (b - a)
        out.append((window_on(k, schedule), ops / dur if dur > 0 else 0.0))
    return out


def paired_cost(pairs, order):
    """The cost 1 - on/off over pairs: mean, median, sd, se and 95 % t interval (None: no pairs)."""
    if not pairs:
        return None
    costs = [1 - on / off for on, off in pairs]
    mean = statistics.fmean(costs)
    sd = statistics.stdev(costs) if len(costs) > 1 else 0.0
    res = {"pairs": len(costs), "order": order, "costs": costs, "mean": mean,
           "median": statistics.median(costs), "sd": sd, "se": 0.0, "ci95_low": mean, "ci95_high": mean}
    if len(costs) > 1:
        se = sd / math.sqrt(len(costs))
        h = t975(len(costs) - 1) * se
        res.update(se=se, ci95_low=mean - h, ci95_high=mean + h)
    return res


def side_by_side_pairs(a, b):
    """Pairs of a side-by-side run: a and b are [(on, rate), ...] of two clusters measured over the
    same windows (window 1 first), one with hints on and the other off in each window, swapping.

    Window k gives r_k = on rate / off rate, two clusters at the same moment: whatever the machine's
    speed was in that window cancels. The clusters themselves may differ by a factor d (data layout,
    cache): r_k = (1 - c) d when A is on and (1 - c) / d when B is on, so windows (1, 2), (3, 4), ...
    combine to sqrt(r_k r_k+1) = 1 - c. Returned as [(sqrt(r_k r_k+1), 1.0)] for paired_cost, with the
    order "side-by-side"; a pair is skipped when a window has both or neither cluster on, the two
    windows have the same cluster on, or a rate is not positive."""
    pairs = []
    for i in range(0, min(len(a), len(b)) - 1, 2):
        (a1_on, a1), (b1_on, b1), (a2_on, a2), (b2_on, b2) = a[i], b[i], a[i + 1], b[i + 1]
        if a1_on == b1_on or a2_on == b2_on or a1_on == a2_on or not min(a1, b1, a2, b2) > 0:
            continue
        r1 = a1 / b1 if a1_on else b1 / a1
        r2 = a2 / b2 if a2_on else b2 / a2
        pairs.append((math.sqrt(r1 * r2), 1.0))
    return pairs, "side-by-side"


def side_by_side_windows(out):
    """The measured windows (after the warm-up window 0) of a side-by-side run's clusters a and b,
    from OUT/a/result.json and OUT/b/result.json: ({window: figures} of a, of b, the windows both
    have, ascending)."""
    def load(name):
        with open(f"{out}/{name}/result.json") as f:
            return {w["window"]: w for w in json.load(f)["windows"] if w["window"] > 0}
    a, b = load("a"), load("b")
    return a, b, sorted(set(a) & set(b))


def window_ratios(a, b):
    """Two clusters measured over the same windows (rates or costs, window 1 first): the geometric
    mean of b_k / a_k with a 95 % t interval on the mean log ratio (None: no window with both
    positive)."""
    logs = [math.log(y / x) for x, y in zip(a, b) if x > 0 and y > 0]
    if not logs:
        return None
    mean = statistics.fmean(logs)
    sd = statistics.stdev(logs) if len(logs) > 1 else 0.0
    h = t975(len(logs) - 1) * sd / math.sqrt(len(logs)) if len(logs) > 1 else 0.0
    return {"windows": len(logs), "ratio": math.exp(mean), "sd_log": sd,
            "ci95_low": math.exp(mean - h), "ci95_high": math.exp(mean + h)}


def describe(c):
    """One line for a paired_cost result."""
    return (f"{c['pairs']} pairs ({c['order']} order), cost 1 - on/off: mean {100 * c['mean']:.2f} %, "
            f"95 % CI [{100 * c['ci95_low']:.2f} %, {100 * c['ci95_high']:.2f} %], median {100 * c['median']:.2f} %, "
            f"sd {100 * c['sd']:.2f} %")
