// Package analysis reads finished scenario reports (package scenario's report.json) and states what
// they show together: each figure's mean, spread and range over repetitions (Aggregate, Pool), the
// toggled windows' pairs of several runs pooled into one interval, and two variants' runs paired as
// they ran with bootstrap intervals on their ratios (Compare). It runs nothing and never changes a
// report.
package analysis

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/bench/scenario"
)

// One run of a scenario is one sample of a noisy machine: the join's worst 10-s bin before the join
// already lies 8–25 % below the mean. Repeating a scenario and reporting each figure's mean, spread
// and range (Aggregate, Pool), pairing the runs of two variants as they ran side by side with an
// interval over the pairs (Compare), and pooling the pairs of toggled windows of several runs are
// how a claim about a few per cent becomes checkable.

// Stat is one figure over the repetitions of a run: its count, median and range, mean and sample
// standard deviation (0 for one sample).
type Stat struct {
	report.Spread
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
}

func newStat(xs []float64) Stat {
	s := Stat{Spread: report.SpreadOf(xs)}
	if len(xs) > 0 {
		s.Mean, s.SD = report.MeanSD(xs)
	}
	return s
}

// readReport reads a finished run's report.json for the command op (its errors name both).
func readReport(op, path string) (*scenario.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var rep scenario.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %s: not a scenario report: %w", op, path, err)
	}
	if len(rep.Runs) == 0 {
		return nil, fmt.Errorf("%s: %s: not a scenario report (no runs)", op, path)
	}
	return &rep, nil
}

// bootstrapRatio is mean(num) / mean(den) over n paired samples with its 95 % percentile bootstrap
// interval (the samples resampled; a fixed seed, so that an analysis reprints the same). A ratio
// with a zero denominator is +Inf.
func bootstrapRatio(n int, num, den func(i int) float64, resamples int) (ratio, lo, hi float64) {
	of := func(idx func(k int) int) float64 {
		var a, b float64
		for k := 0; k < n; k++ {
			i := idx(k)
			a, b = a+num(i), b+den(i)
		}
		if b == 0 {
			return math.Inf(1)
		}
		return a / b
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rs := make([]float64, resamples)
	for i := range rs {
		rs[i] = of(func(int) int { return rng.IntN(n) })
	}
	slices.Sort(rs)
	return of(func(k int) int { return k }), rs[int(0.025*float64(resamples))], rs[int(math.Ceil(0.975*float64(resamples)))-1]
}
