package report

import (
	"fmt"
	"math"
)

// The cost of read hints is a few percent of throughput, while on a shared machine one window's
// throughput moves by ±5–25 % for reasons outside the run: a single on/off comparison cannot resolve
// it; many short windows in ABBA order can, with a confidence interval over the pairs.

// ToggleWindow is one window of a toggled run, after its skip: its mean throughput, and the share of
// the machine's CPU its host took (steal).
type ToggleWindow struct {
	On      bool    `json:"on"`
	FromS   float64 `json:"from_s"`
	ToS     float64 `json:"to_s"`
	OpsPerS float64 `json:"ops_per_s"`
	Steal   float64 `json:"steal"`
}

// PairedCost is the cost of a policy (1 − throughput on / off) estimated from pairs of adjacent
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
	// CILow and CIHigh bound the mean with 95 % confidence (Student's t over the pairs).
	CILow  float64 `json:"ci95_low"`
	CIHigh float64 `json:"ci95_high"`
}

func (c *PairedCost) String() string {
	if c == nil {
		return "no pairs"
	}
	return fmt.Sprintf("%d pairs (%s order), cost 1 - on/off: mean %.2f%%, 95%% CI [%.2f%%, %.2f%%], median %.2f%%, sd %.2f%%",
		c.Pairs, c.Order, 100*c.Mean, 100*c.CILow, 100*c.CIHigh, 100*c.Median, 100*c.SD)
}

// PairWindows groups windows (1, 2), (3, 4), … into pairs and keeps those with one window on and
// one off, neither of which the host stole stealMax or more from, as {on, off} throughputs; order
// says whether the kept pairs alternate their first half (ABBA).
func PairWindows(wins []ToggleWindow, stealMax float64) (pairs [][2]float64, order string) {
	order = "abba"
	prevOnFirst := false
	for i := 0; i+1 < len(wins); i += 2 {
		a, b := wins[i], wins[i+1]
		if a.On == b.On || a.OpsPerS <= 0 || b.OpsPerS <= 0 || a.Steal >= stealMax || b.Steal >= stealMax {
			continue
		}
		if len(pairs) > 0 && a.On == prevOnFirst {
			order = "same"
		}
		if a.On {
			pairs = append(pairs, [2]float64{a.OpsPerS, b.OpsPerS})
		} else {
			pairs = append(pairs, [2]float64{b.OpsPerS, a.OpsPerS})
		}
		prevOnFirst = a.On
	}
	if len(pairs) < 2 {
		order = "same"
	}
	return pairs, order
}

// CostOfPairs estimates the cost from {on, off} throughput pairs (nil without any).
func CostOfPairs(pairs [][2]float64, order string) *PairedCost {
	var costs []float64
	for _, p := range pairs {
		costs = append(costs, 1-p[0]/p[1])
	}
	return PairedCostOf(costs, order)
}

// PairedCostOf summarizes per-pair costs: mean, median, sd and a 95 % t interval (none with one
// pair).
func PairedCostOf(costs []float64, order string) *PairedCost {
	if len(costs) == 0 {
		return nil
	}
	c := &PairedCost{Pairs: len(costs), Order: order, Costs: costs, Median: Median(costs)}
	c.Mean, c.SD = MeanSD(costs)
	h := 0.0
	if n := len(costs); n >= 2 {
		h = tQuantile975(n-1) * c.SD / math.Sqrt(float64(n))
	}
	c.CILow, c.CIHigh = c.Mean-h, c.Mean+h
	return c
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
	for i := 1; i < len(knots); i++ {
		if lo, hi := knots[i-1], knots[i]; float64(df) <= hi.df {
			x, xl, xh := 1/float64(df), 1/lo.df, 1/hi.df
			return lo.t + (hi.t-lo.t)*(xl-x)/(xl-xh)
		}
	}
	return 1.960
}
