package scenario

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Four ABBA pairs: the costs, their mean, median and t interval (3 degrees of freedom: 3.182). The
// same figures are checked by scripts/readhints_stats_test.py.
func TestPairedCostABBA(t *testing.T) {
	wins := []ToggleWindow{{On: true, OpsPerS: 980}, {On: false, OpsPerS: 1000},
		{On: false, OpsPerS: 1010}, {On: true, OpsPerS: 990},
		{On: true, OpsPerS: 970}, {On: false, OpsPerS: 1000},
		{On: false, OpsPerS: 1000}, {On: true, OpsPerS: 1000}}
	pairs, order := pairWindows(wins)
	if len(pairs) != 4 || order != "abba" || pairs[1] != [2]float64{990, 1010} {
		t.Fatalf("pairs %v order %q: want 4 ABBA pairs, the second {990, 1010}", pairs, order)
	}
	c := pairedCost(pairs, order)
	if !near(c.Mean, 0.017450495049504966) || !near(c.Median, 0.01990099009900992) || !near(c.SD, 0.012570326300081766) {
		t.Fatalf("mean %v median %v sd %v", c.Mean, c.Median, c.SD)
	}
	if !near(c.CILow, -0.002548894093925124) || !near(c.CIHigh, 0.03744988419293506) {
		t.Fatalf("95 %% CI [%v, %v]", c.CILow, c.CIHigh)
	}
}

// Pairs of the same state are left out, and pairs that always start with the same half are not
// called ABBA; one pair has no interval.
func TestPairWindowsOrderAndGaps(t *testing.T) {
	wins := []ToggleWindow{{On: false, OpsPerS: 1000}, {On: true, OpsPerS: 950},
		{On: true, OpsPerS: 900}, {On: true, OpsPerS: 900},
		{On: false, OpsPerS: 1000}, {On: true, OpsPerS: 990}, {On: false, OpsPerS: 5}}
	pairs, order := pairWindows(wins)
	if len(pairs) != 2 || order != "same" {
		t.Fatalf("pairs %v order %q: want 2 pairs in the same order", pairs, order)
	}
	one := pairedCost(pairs[:1], "same")
	if one.Pairs != 1 || !near(one.Mean, 0.05) || one.CILow != one.Mean || one.CIHigh != one.Mean {
		t.Fatalf("one pair: %+v", one)
	}
	if pairedCost(nil, "same") != nil {
		t.Fatal("no pairs: want no estimate")
	}
}

func TestTQuantile975(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
	}{{1, 12.706}, {9, 2.262}, {30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}} {
		if got := tQuantile975(c.df); !near(got, c.want) {
			t.Fatalf("t(%d) = %v, want %v", c.df, got, c.want)
		}
	}
	if got := tQuantile975(47); got >= 2.021 || got <= 2.000 {
		t.Fatalf("t(47) = %v, want between t(60) and t(40)", got)
	}
	if got := tQuantile975(100000); got < 1.96 || got > 1.961 {
		t.Fatalf("t(100000) = %v, want about 1.96", got)
	}
	if !math.IsNaN(tQuantile975(0)) {
		t.Fatal("t(0): want NaN")
	}
}

// A run on the ABBA schedule through analyzeRun: hints cost 2 % while the throughput drifts up by
// 1 op/s per second; every window is measured from 5 s after its switch, and the pairs' mean is the
// cost with the drift cancelled over each two pairs.
func TestAnalyzeTogglesABBA(t *testing.T) {
	const warm, win, pairs = 20, 12, 8
	evs := []EventMark{{T: 0, Label: "gather"}}
	for _, e := range abbaEvents(warm*1e9, win*1e9, pairs) {
		evs = append(evs, EventMark{T: e.At.Seconds(), Label: e.What})
	}
	n := warm + 2*pairs*win
	ops := make([]int64, n)
	on := true
	for i := range ops {
		sec := float64(i) + 0.5 // second i+1 covers (i, i+1]
		for _, e := range evs[1:] {
			if e.T <= sec {
				on = e.Label == "hints on"
			}
		}
		v := 1000 + float64(i)
		if on {
			v *= 0.98
		}
		ops[i] = int64(math.Round(v))
	}
	got := analyzeRun(RunReport{Series: series(ops...), Events: evs}, nil, 5)
	if len(got.ToggleWindows) != 2*pairs {
		t.Fatalf("%d windows, want %d", len(got.ToggleWindows), 2*pairs)
	}
	if w := got.ToggleWindows[0]; !w.On || w.FromS != warm+5 || w.ToS != warm+win {
		t.Fatalf("first window %+v: want on, from %d to %d s", w, warm+5, warm+win)
	}
	c := got.TogglePaired
	if c == nil || c.Pairs != pairs || c.Order != "abba" {
		t.Fatalf("paired %+v: want %d ABBA pairs", c, pairs)
	}
	if math.Abs(c.Mean-0.02) > 0.001 || c.CILow > 0.02 || c.CIHigh < 0.02 {
		t.Fatalf("cost %v, CI [%v, %v]: want about 0.02, inside the interval", c.Mean, c.CILow, c.CIHigh)
	}
}
