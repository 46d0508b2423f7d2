package scenario

import (
	"context"
	"math"
	"strings"
	"testing"
)

func TestNewStat(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want Stat
	}{
		{"none", nil, Stat{}},
		{"one", []float64{3}, Stat{N: 1, Mean: 3, Min: 3, Max: 3}},
		// Sample sd of 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sd sqrt(32/7).
		{"eight", []float64{2, 4, 4, 4, 5, 5, 7, 9}, Stat{N: 8, Mean: 5, SD: math.Sqrt(32.0 / 7), Min: 2, Max: 9}},
	} {
		got := newStat(tc.xs)
		if got.N != tc.want.N || math.Abs(got.Mean-tc.want.Mean) > 1e-12 || math.Abs(got.SD-tc.want.SD) > 1e-12 || got.Min != tc.want.Min || got.Max != tc.want.Max {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Runs are matched across repetitions by variant (or policy on/off), whatever their order; a join
// that did not finish adds its throughput but none of the join's figures.
func TestAggregateMatchesRunsAcrossRepetitions(t *testing.T) {
	run := func(variant string, tput float64, j *JoinReport) RunReport {
		return RunReport{Variant: variant, Summary: Summary{Throughput: tput, P99Ms: 10}, Join: j}
	}
	done := func(dip float64, windows int) *JoinReport {
		return &JoinReport{Done: true, JoinS: 10, WorstDip: dip, ViolatingWindows: windows}
	}
	reps := []*Report{
		{Runs: []RunReport{run("incremental", 1000, done(-0.02, 2)), run("parallel", 900, done(-0.10, 6))}},
		{Runs: []RunReport{run("parallel", 920, done(-0.12, 4)), run("incremental", 1100, done(0, 0))}},
		{Runs: []RunReport{run("incremental", 1050, &JoinReport{Done: false, WorstDip: -0.5}), run("parallel", 910, done(-0.11, 5))}},
	}
	agg := aggregate("join", reps, []string{"a", "b", "c"})
	if strings.Join(agg.Labels, ",") != "incremental,parallel" {
		t.Fatalf("labels %v", agg.Labels)
	}
	inc, par := agg.Stats["incremental"], agg.Stats["parallel"]
	if s := inc["throughput"]; s.N != 3 || s.Mean != 1050 || s.Min != 1000 || s.Max != 1100 {
		t.Errorf("incremental throughput %+v", s)
	}
	if s := inc["worst_dip"]; s.N != 2 || math.Abs(s.Mean-(-0.01)) > 1e-12 {
		t.Errorf("incremental worst dip %+v: the unfinished join must not count", s)
	}
	if s := par["violating_windows"]; s.N != 3 || s.Mean != 5 || s.Min != 4 || s.Max != 6 {
		t.Errorf("parallel violating windows %+v", s)
	}
	var b strings.Builder
	if err := agg.Print(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "worst_dip") || !strings.Contains(b.String(), "parallel") {
		t.Errorf("table lacks rows:\n%s", b.String())
	}
}

func TestRunRepeatedRefusesOneRepetition(t *testing.T) {
	if _, err := RunRepeated(context.Background(), Scenario{Name: "x"}, Options{}, 1); err == nil {
		t.Fatal("one repetition accepted")
	}
}
