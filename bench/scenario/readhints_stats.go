package scenario

import (
	"math"
	"sort"
)

// The steady-state cost of read hints is a few percent of throughput, while on the shared machine
// one window's throughput moves by ±5–25 % for reasons outside the run. A single on/off comparison
// therefore cannot resolve it; many short windows with hints on and off in ABBA order (on, off |
// off, on | on, off | …: a linear drift over the run cancels within every two pairs) can, with a
// confidence interval over the pairs. scripts/readhints_stats.py is the same computation for
// scripts/readhints-saturated.sh (both are tested against the same figures).

// ToggleWindow is the mean throughput of one window of a toggled run, after its warm-up.
type ToggleWindow struct {
	On      bool    `json:"on"`
	FromS   float64 `json:"from_s"`
	ToS     float64 `json:"to_s"`
	OpsPerS float64 `json:"ops_per_s"`
}

// PairedCost is the cost of hints (1 − throughput on / off) estimated from pairs of adjacent
// windows, one on and one off.
type PairedCost struct {
	Pairs int `json:"pairs"`
	// Order is "abba" when the pairs alternate which half comes first, "same" otherwise (a drift
	// over the run then biases every pair the same way).
	Order string `json:"order"`
	// Costs are the pairs' 1 − on/off, in run order.
	Costs  []float64 `json:"costs"`
	Mean   float64   `json:"mean"`
	Median float64   `json:"median"`
	SD     float64   `json:"sd"`
	SE     float64   `json:"se"`
	// CILow and CIHigh bound the mean with 95 % confidence (Student's t over the pairs).
	CILow  float64 `json:"ci95_low"`
	CIHigh float64 `json:"ci95_high"`
}

// pairWindows groups windows (1, 2), (3, 4), … into pairs and keeps those with one window on and
// one off, returned as {on, off} throughputs; order says whether the kept pairs alternate their
// first half (ABBA).
func pairWindows(wins []ToggleWindow) (pairs [][2]float64, order string) {
	order = "abba"
	prevOnFirst, n := false, 0
	for i := 0; i+1 < len(wins); i += 2 {
		a, b := wins[i], wins[i+1]
		if a.On == b.On || a.OpsPerS <= 0 || b.OpsPerS <= 0 {
			continue
		}
		if a.On {
			pairs = append(pairs, [2]float64{a.OpsPerS, b.OpsPerS})
		} else {
			pairs = append(pairs, [2]float64{b.OpsPerS, a.OpsPerS})
		}
		if n > 0 && a.On == prevOnFirst {
			order = "same"
		}
		prevOnFirst = a.On
		n++
	}
	if n < 2 {
		order = "same"
	}
	return pairs, order
}

// pairedCost estimates the cost from {on, off} throughput pairs. With fewer than two pairs only the
// mean and median are set (no interval).
func pairedCost(pairs [][2]float64, order string) *PairedCost {
	if len(pairs) == 0 {
		return nil
	}
	c := &PairedCost{Pairs: len(pairs), Order: order}
	for _, p := range pairs {
		c.Costs = append(c.Costs, 1-p[0]/p[1])
	}
	c.Mean, c.SD = meanSD(c.Costs)
	c.Median = median(c.Costs)
	c.CILow, c.CIHigh = c.Mean, c.Mean
	if n := len(c.Costs); n >= 2 {
		c.SE = c.SD / math.Sqrt(float64(n))
		h := tQuantile975(n-1) * c.SE
		c.CILow, c.CIHigh = c.Mean-h, c.Mean+h
	}
	return c
}

// meanSD is the mean and the sample standard deviation (n − 1) of xs.
func meanSD(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// tTable975 is Student's t 0.975 quantile for 1–30 degrees of freedom.
var tTable975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// tQuantile975 is Student's t 0.975 quantile (the half-width factor of a two-sided 95 % interval)
// for df degrees of freedom: the table up to 30, then linear in 1/df through 40, 60, 120 and ∞.
func tQuantile975(df int) float64 {
	if df < 1 {
		return math.NaN()
	}
	if df <= len(tTable975) {
		return tTable975[df-1]
	}
	knots := []struct{ df, t float64 }{{30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}, {math.Inf(1), 1.960}}
	x := 1 / float64(df)
	for i := 1; i < len(knots); i++ {
		lo, hi := knots[i-1], knots[i]
		if float64(df) <= hi.df {
			xl, xh := 1/lo.df, 1/hi.df
			return lo.t + (hi.t-lo.t)*(xl-x)/(xl-xh)
		}
	}
	return 1.960
}
