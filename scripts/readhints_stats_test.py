"""Tests of readhints_stats.py: python3 scripts/readhints_stats_test.py (the figures of
bench/scenario/readhints_stats_test.go)."""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import readhints_stats as rs  # noqa: E402


class TestStats(unittest.TestCase):
    def test_abba(self):
        wins = [(True, 980), (False, 1000), (False, 1010), (True, 990),
                (True, 970), (False, 1000), (False, 1000), (True, 1000)]
        pairs, order = rs.pair_windows(wins)
        self.assertEqual(order, "abba")
        self.assertEqual(pairs[1], (990, 1010))
        c = rs.paired_cost(pairs, order)
        self.assertAlmostEqual(c["mean"], 0.017450495049504966, places=12)
        self.assertAlmostEqual(c["median"], 0.01990099009900992, places=12)
        self.assertAlmostEqual(c["sd"], 0.012570326300081766, places=12)
        self.assertAlmostEqual(c["ci95_low"], -0.002548894093925124, places=12)
        self.assertAlmostEqual(c["ci95_high"], 0.03744988419293506, places=12)

    def test_order_and_gaps(self):
        wins = [(False, 1000), (True, 950), (True, 900), (True, 900), (False, 1000), (True, 990), (False, 5)]
        pairs, order = rs.pair_windows(wins)
        self.assertEqual((len(pairs), order), (2, "same"))
        one = rs.paired_cost(pairs[:1], "same")
        self.assertAlmostEqual(one["mean"], 0.05)
        self.assertEqual(one["ci95_low"], one["mean"])
        self.assertIsNone(rs.paired_cost([], "same"))

    def test_side_by_side(self):
        self.assertEqual([rs.window_on(k, "alt-inverted") for k in range(4)], [True, True, False, True])
        # Cluster A is 10 % faster than B; hints cost 2 %; the machine's speed halves in windows 3-4.
        a = [(False, 1100), (True, 1078), (False, 550), (True, 539)]
        b = [(True, 980), (False, 1000), (True, 490), (False, 500)]
        pairs, order = rs.side_by_side_pairs(a, b)
        self.assertEqual(order, "side-by-side")
        c = rs.paired_cost(pairs, order)
        self.assertEqual(c["pairs"], 2)
        self.assertAlmostEqual(c["mean"], 0.02, places=12)
        self.assertAlmostEqual(c["sd"], 0.0, places=12)
        # Both on in a window, or the same cluster on in both windows of a pair: skipped.
        self.assertEqual(rs.side_by_side_pairs([(True, 1), (True, 1)], [(True, 1), (False, 1)])[0], [])
        self.assertEqual(rs.side_by_side_pairs([(True, 1), (True, 1)], [(False, 1), (False, 1)])[0], [])

    def test_t975(self):
        for df, want in [(1, 12.706), (9, 2.262), (30, 2.042), (40, 2.021), (60, 2.0), (120, 1.98)]:
            self.assertAlmostEqual(rs.t975(df), want, places=9)
        self.assertTrue(2.0 < rs.t975(47) < 2.021)
        self.assertTrue(1.96 <= rs.t975(100000) <= 1.961)
        self.assertTrue(math.isnan(rs.t975(0)))

    def test_schedules(self):
        self.assertEqual([rs.window_on(k, "alt") for k in range(5)], [True, False, True, False, True])
        self.assertEqual([rs.window_on(k, "abba") for k in range(9)],
                         [True, False, True, True, False, False, True, True, False])
        with self.assertRaises(ValueError):
            rs.window_on(1, "abab")

    def test_drift_cancels(self):
        # 2 % cost, throughput drifting up 1 % per window: ABBA pairs recover the cost.
        wins = []
        for k in range(1, 33):
            on = rs.window_on(k, "abba")
            rate = 1000 * (1 + 0.01 * k) * (0.98 if on else 1)
            wins.append((on, rate))
        c = rs.paired_cost(*rs.pair_windows(wins))
        self.assertEqual((c["pairs"], c["order"]), (16, "abba"))
        self.assertAlmostEqual(c["mean"], 0.02, delta=0.0005)
        self.assertTrue(c["ci95_low"] <= 0.02 <= c["ci95_high"])

    def test_window_ratios(self):
        # b 10 % faster than a in every window while the machine's speed swings by 2x: the ratio holds.
        a = [1000 * (1 + (k % 3) / 2) for k in range(12)]
        b = [x * 1.1 for x in a]
        r = rs.window_ratios(a, b)
        self.assertEqual(r["windows"], 12)
        self.assertAlmostEqual(r["ratio"], 1.1, places=9)
        self.assertAlmostEqual(r["ci95_low"], 1.1, places=9)
        # A window with a zero rate is skipped; none left: None.
        self.assertEqual(rs.window_ratios([0, 100], [50, 200])["windows"], 1)
        self.assertIsNone(rs.window_ratios([0], [1]))
        # Noisy ratios: the interval holds the mean.
        r = rs.window_ratios([100, 100, 100, 100], [105, 95, 110, 90])
        self.assertTrue(r["ci95_low"] < r["ratio"] < r["ci95_high"])


    def test_timeline_windows(self):
        # 100-ms points from t0 = 1000: 1 000 ops/s off, 980 on; windows of 2 s, the first 0.5 s skipped.
        t0, window, windows, skip = 1000.0, 2, 4, 0.5
        points = [{"phase": "load", "unix_s": 990.0, "ops": 5}]
        for i in range(0, 10 * window * (windows + 1) + 1):
            t = t0 + i / 10
            k = int((t - t0 - 1e-9) // window)
            on = rs.window_on(max(k, 0), "abba")
            points.append({"phase": "run", "unix_s": t, "ops": 98 if on else 100})
        wins = rs.timeline_windows(points, t0, window, windows, skip, "abba")
        self.assertEqual([w[0] for w in wins], [False, True, True, False])
        for on, rate in wins:
            self.assertAlmostEqual(rate, 980 if on else 1000, delta=1e-6)
        c = rs.paired_cost(*rs.pair_windows(wins))
        self.assertEqual(c["pairs"], 2)
        self.assertAlmostEqual(c["mean"], 0.02, places=9)
        # A window the timeline does not reach has rate 0.
        self.assertEqual(rs.timeline_windows(points, t0 + 100, window, 1, skip, "abba"), [(False, 0.0)])

if __name__ == "__main__":
    unittest.main()
