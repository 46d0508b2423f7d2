package analysis

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/bench/scenario"
)

func TestNewStat(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want Stat
	}{
		{"none", nil, Stat{}},
		{"one", []float64{3}, Stat{Spread: report.Spread{N: 1, Median: 3, Min: 3, Max: 3}, Mean: 3}},
		// Sample sd of 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sd sqrt(32/7).
		{"eight", []float64{2, 4, 4, 4, 5, 5, 7, 9}, Stat{Spread: report.Spread{N: 8, Median: 4.5, Min: 2, Max: 9}, Mean: 5, SD: math.Sqrt(32.0 / 7)}},
	} {
		got := newStat(tc.xs)
		if got.N != tc.want.N || math.Abs(got.Mean-tc.want.Mean) > 1e-12 || math.Abs(got.SD-tc.want.SD) > 1e-12 || got.N > 0 && got.Median != tc.want.Median || got.Min != tc.want.Min || got.Max != tc.want.Max {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Runs are matched across repetitions by variant (or policy on/off), whatever their order; a join
// that did not finish adds its throughput but none of the join's figures.
func TestAggregateMatchesRunsAcrossRepetitions(t *testing.T) {
	run := func(variant string, tput float64, j *scenario.JoinReport) scenario.RunReport {
		return scenario.RunReport{Variant: variant, Summary: scenario.Summary{Throughput: tput, P99Ms: 10}, Join: j}
	}
	done := func(dip float64, windows int) *scenario.JoinReport {
		return &scenario.JoinReport{Done: true, JoinS: 10, WorstDip: dip, ViolatingWindows: windows}
	}
	reps := []*scenario.Report{
		{Runs: []scenario.RunReport{run("incremental", 1000, done(-0.02, 2)), run("parallel", 900, done(-0.10, 6))}},
		{Runs: []scenario.RunReport{run("parallel", 920, done(-0.12, 4)), run("incremental", 1100, done(0, 0))}},
		{Runs: []scenario.RunReport{run("incremental", 1050, &scenario.JoinReport{Done: false, WorstDip: -0.5}), run("parallel", 910, done(-0.11, 5))}},
	}
	agg := Aggregate("join", reps, []string{"a", "b", "c"})
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

// The *_common figures recount every finished join's 1-s p99 windows against one threshold, the mean
// of the runs' own: two runs with the same latencies score the same whatever their steady states.
func TestAggregateCommonThreshold(t *testing.T) {
	// Seconds at t = 1..10 (midpoints 0.5..9.5); the join runs from 2 to 6.
	lat := secondsP99(50, 50, 130, 150, 90, 200, 50, 160, 50, 50)
	run := func(variant string, thr float64, done bool) scenario.RunReport {
		return scenario.RunReport{Variant: variant, Series: lat,
			Join: &scenario.JoinReport{Done: done, JoinStartS: 2, JoinS: 4, SLOThresholdMs: thr}}
	}
	reps := []*scenario.Report{
		{Runs: []scenario.RunReport{run("fast", 100, true), run("slow", 140, true)}},
		{Runs: []scenario.RunReport{run("fast", 120, true), run("slow", 1000, false)}}, // unfinished: no threshold, no score
	}
	agg := Aggregate("join-surge", reps, []string{"a", "b"})
	if agg.CommonSLOThresholdMs != 120 {
		t.Fatalf("common threshold %v, want 120 (the finished runs' mean)", agg.CommonSLOThresholdMs)
	}
	// During the join (seconds with midpoints 2.5..5.5: 130, 150, 90, 200): 3 above 120, excess 10+30+80.
	for _, tc := range []struct {
		label, figure string
		n             int
		mean          float64
	}{
		{"fast", "violating_windows_common", 2, 3},
		{"fast", "excess_common_ms", 2, 120},
		{"slow", "violating_windows_common", 1, 3},
	} {
		if s := agg.Stats[tc.label][tc.figure]; s.N != tc.n || math.Abs(s.Mean-tc.mean) > 1e-9 {
			t.Errorf("%s %s: %+v, want n %d mean %v", tc.label, tc.figure, s, tc.n, tc.mean)
		}
	}
	var b strings.Builder
	if err := agg.Print(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "violating_windows_common") || !strings.Contains(b.String(), "120.0 ms") {
		t.Errorf("table lacks the common figures:\n%s", b.String())
	}
}

// Pool reads finished runs back from their report.json files and aggregates them as a --repeat
// would; it refuses reports of different scenarios, files that are not reports, and a single report.
func TestPoolReadsReports(t *testing.T) {
	run := func(variant string, windows int) scenario.RunReport {
		return scenario.RunReport{Variant: variant, Summary: scenario.Summary{Throughput: 100, P99Ms: 10},
			Join: &scenario.JoinReport{Done: true, JoinS: 10, ViolatingWindows: windows, SLOThresholdMs: 150}}
	}
	paths := writeReports(t, scenario.Report{Scenario: "join-long", Runs: []scenario.RunReport{run("incremental", 1), run("parallel", 4)}},
		scenario.Report{Scenario: "join-long", Runs: []scenario.RunReport{run("parallel", 2), run("incremental", 3)}},
		scenario.Report{Scenario: "join", Runs: []scenario.RunReport{run("incremental", 0)}}, scenario.Report{})
	a, b, other, notReport := paths[0], paths[1], paths[2], paths[3]

	agg, err := Pool([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if agg.Scenario != "join-long" || agg.Repetitions != 2 || agg.CommonSLOThresholdMs != 150 {
		t.Errorf("pooled %q, %d repetitions, threshold %v", agg.Scenario, agg.Repetitions, agg.CommonSLOThresholdMs)
	}
	if s := agg.Stats["incremental"]["violating_windows"]; s.N != 2 || s.Mean != 2 {
		t.Errorf("incremental windows %+v, want n 2 mean 2", s)
	}
	if s := agg.Stats["parallel"]["violating_windows"]; s.N != 2 || s.Mean != 3 {
		t.Errorf("parallel windows %+v, want n 2 mean 3", s)
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"one report", []string{a}, "at least 2"},
		{"other scenario", []string{a, other}, "different scenarios"},
		{"not a report", []string{a, notReport}, "no runs"},
		{"missing file", []string{a, filepath.Join(filepath.Dir(a), "none.json")}, "no such file"},
	} {
		if _, err := Pool(tc.paths); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// Pool pools the toggled windows' pairs of every run: one interval over all their costs.
func TestPoolPairsToggledWindows(t *testing.T) {
	run := func(costs ...float64) scenario.RunReport {
		return scenario.RunReport{Variant: "recurring", ReadHints: &scenario.ReadHintsRun{Paired: report.PairedCostOf(costs, "abba"), PairedLowSteal: report.PairedCostOf(costs[1:], "abba")}}
	}
	agg := Aggregate("read-hints-overhead", []*scenario.Report{{Runs: []scenario.RunReport{run(0.01, 0.03)}}, {Runs: []scenario.RunReport{run(0.02, 0.02)}}}, nil)
	if c := agg.Paired["recurring"]; c == nil || c.Pairs != 4 || math.Abs(c.Mean-0.02) > 1e-9 || c.CILow >= 0.02 || c.CIHigh <= 0.02 {
		t.Fatalf("pooled pairs %+v, want 4 pairs, mean 0.02 inside its interval", c)
	}
	if c := agg.PairedLowSteal["recurring"]; c == nil || c.Pairs != 2 || math.Abs(c.Mean-0.025) > 1e-9 {
		t.Fatalf("pooled low-steal pairs %+v, want 2 pairs, mean 0.025", c)
	}
	var b strings.Builder
	if err := agg.Print(&b); err != nil || !strings.Contains(b.String(), "recurring, all pairs: 4 pairs (pooled order)") {
		t.Errorf("print: %v\n%s", err, b.String())
	}
}
