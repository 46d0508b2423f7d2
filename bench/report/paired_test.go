package report

import (
	"math"
	"testing"
)

// Four ABBA pairs: the costs, their mean, median and t interval (3 degrees of freedom: 3.182).
func TestPairedCostABBA(t *testing.T) {
	wins := []ToggleWindow{{On: true, OpsPerS: 980}, {On: false, OpsPerS: 1000},
		{On: false, OpsPerS: 1010}, {On: true, OpsPerS: 990},
		{On: true, OpsPerS: 970}, {On: false, OpsPerS: 1000},
		{On: false, OpsPerS: 1000}, {On: true, OpsPerS: 1000}}
	pairs, order := PairWindows(wins, 1)
	if len(pairs) != 4 || order != "abba" || pairs[1] != [2]float64{990, 1010} {
		t.Fatalf("pairs %v order %q: want 4 ABBA pairs, the second {990, 1010}", pairs, order)
	}
	c := CostOfPairs(pairs, order)
	if !near(c.Mean, 0.017450495049504966) || !near(c.Median, 0.01990099009900992) || !near(c.SD, 0.012570326300081766) {
		t.Fatalf("mean %v median %v sd %v", c.Mean, c.Median, c.SD)
	}
	if !near(c.CILow, -0.002548894093925124) || !near(c.CIHigh, 0.03744988419293506) {
		t.Fatalf("95 %% CI [%v, %v]", c.CILow, c.CIHigh)
	}
	// A pair with a window the host stole from is left out of the low-steal pairs.
	wins[2].Steal = 0.2
	if pairs, _ := PairWindows(wins, 0.08); len(pairs) != 3 {
		t.Fatalf("low-steal pairs %v, want 3", pairs)
	}
}

// Pairs of the same state are left out, and pairs that always start with the same half are not
// called ABBA; one pair has no interval.
func TestPairWindowsOrderAndGaps(t *testing.T) {
	wins := []ToggleWindow{{On: false, OpsPerS: 1000}, {On: true, OpsPerS: 950},
		{On: true, OpsPerS: 900}, {On: true, OpsPerS: 900},
		{On: false, OpsPerS: 1000}, {On: true, OpsPerS: 990}, {On: false, OpsPerS: 5}}
	pairs, order := PairWindows(wins, 1)
	if len(pairs) != 2 || order != "same" {
		t.Fatalf("pairs %v order %q: want 2 pairs in the same order", pairs, order)
	}
	one := CostOfPairs(pairs[:1], "same")
	if one.Pairs != 1 || !near(one.Mean, 0.05) || one.CILow != one.Mean || one.CIHigh != one.Mean {
		t.Fatalf("one pair: %+v", one)
	}
	if CostOfPairs(nil, "same") != nil {
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
func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
