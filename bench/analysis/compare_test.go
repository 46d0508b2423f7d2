package analysis

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/bench/scenario"
)

// secondsP99 makes a series of seconds t = 1..n (midpoints 0.5..n-0.5) with the given p99s.
func secondsP99(p99s ...float64) []scenario.Point {
	out := make([]scenario.Point, len(p99s))
	for i, v := range p99s {
		out[i] = scenario.Point{T: float64(i + 1), P99Ms: v}
	}
	return out
}

func joinRun(variant string, start, end, thr float64, done bool, p99s ...float64) scenario.RunReport {
	return scenario.RunReport{Variant: variant, Series: secondsP99(p99s...), Join: &scenario.JoinReport{JoinStartS: start, JoinS: end - start,
		WindowEndS: end, Done: done, SLOThresholdMs: thr, ChapterViolations: 1, ChapterExcessMs: 2}}
}

func writeReports(t *testing.T, reps ...scenario.Report) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, r := range reps {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "rep-"+string(rune('1'+i))+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func ratioFor(t *testing.T, c *Comparison, figure, what string) Ratio {
	t.Helper()
	for _, r := range c.Ratios {
		if r.Figure == figure && r.What == what {
			return r
		}
	}
	t.Fatalf("no ratio %s %s in %+v", figure, what, c.Ratios)
	return Ratio{}
}

// Runs pair in the order they ran within a report; each is scored over its own join's window at its
// own threshold, the control over A's join length from its own start.
func TestComparePairsRunsAndScoresTheFloor(t *testing.T) {
	// Join windows 2..6 (midpoints 2.5..5.5: seconds 3..6).
	rep1 := scenario.Report{Runs: []scenario.RunReport{
		joinRun("incremental", 2, 6, 100, true, 0, 0, 150, 0, 0, 0, 500, 500),    // 1 window, 50 ms
		joinRun("parallel", 2, 6, 100, true, 0, 0, 150, 150, 200, 0, 0, 0),       // 3 windows, 200 ms
		joinRun("no-join", 3, 9, 100, false, 0, 0, 0, 120, 0, 0, 0, 900, 900, 0), // from 3 over 4 s: 1, 20 ms
	}}
	rep2 := scenario.Report{Runs: []scenario.RunReport{
		// Reversed order within the report (as --repeat's second repetition): pairing is by variant.
		joinRun("no-join", 2, 9, 100, false, 0, 0, 110, 110, 0, 0),
		joinRun("parallel", 2, 6, 100, true, 0, 0, 150, 150, 150, 150),   // 4, 200
		joinRun("incremental", 2, 6, 100, true, 0, 0, 110, 110, 0, 0, 0), // 2, 20
	}}
	c, err := Compare(writeReports(t, rep1, rep2), CompareOptions{A: "incremental", B: "parallel", Control: "no-join"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pairs) != 2 || len(c.Skipped) != 0 {
		t.Fatalf("pairs %d, skipped %v", len(c.Pairs), c.Skipped)
	}
	p := c.Pairs[0]
	if p.A.Windows != 1 || p.A.ExcessMs != 50 || p.B.Windows != 3 || p.B.ExcessMs != 200 {
		t.Errorf("pair 1 scores %+v / %+v", p.A, p.B)
	}
	if p.Control == nil || p.Control.StartS != 3 || p.Control.EndS != 7 || p.Control.Windows != 1 || p.Control.ExcessMs != 20 {
		t.Errorf("pair 1 control %+v: want 1 window of 20 ms over [3, 7)", p.Control)
	}
	w := ratioFor(t, c, "windows", "parallel / incremental")
	if w.Num != 3.5 || w.Den != 1.5 || w.Ratio == nil || math.Abs(*w.Ratio-3.5/1.5) > 1e-12 {
		t.Fatalf("windows ratio %+v", w)
	}
	// A resample holds pair 1 twice (3 / 1), pair 2 twice (4 / 2) or both (3.5 / 1.5).
	if w.Lo == nil || w.Hi == nil || *w.Lo > *w.Ratio || *w.Hi < *w.Ratio || *w.Lo < 2 || *w.Hi > 3 {
		t.Errorf("interval [%v, %v] must hold the ratio %v within the pairs' own ratios, 2 and 3", w.Lo, w.Hi, *w.Ratio)
	}
	if f := ratioFor(t, c, "windows", "incremental / floor"); f.Den != 1.5 || f.Num != 1.5 || f.Ratio == nil || *f.Ratio != 1 {
		t.Errorf("incremental / floor %+v, want 1.5 / 1.5", f)
	}
	if f := ratioFor(t, c, "excess_ms", "parallel / floor"); f.Den != 20 || f.Num != 200 {
		t.Errorf("parallel / floor excess %+v, want 200 / 20", f)
	}
	again, err := Compare(writeReports(t, rep1, rep2), CompareOptions{A: "incremental", B: "parallel", Control: "no-join"})
	if a := ratioFor(t, again, "windows", "parallel / incremental"); err != nil || *a.Lo != *w.Lo || *a.Hi != *w.Hi {
		t.Errorf("a second comparison of the same runs differs (the bootstrap's seed is fixed): %v", err)
	}
	// The chapter's score is 1 in every run here (joinRun): a ratio of 1; a denominator of 0 has none.
	if r := ratioFor(t, c, "chapter_violations", "parallel / incremental"); r.Ratio == nil || *r.Ratio != 1 {
		t.Errorf("chapter ratio %+v", r)
	}
	zero := c.ratio("x", "zero", func(int) float64 { return 1 }, func(int) float64 { return 0 })
	if zero.Ratio != nil || zero.Lo != nil || zero.Hi != nil {
		t.Errorf("a ratio over 0: %+v, want none", zero)
	}
	var b strings.Builder
	if err := c.Print(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"no-join (floor)", "2 pairs", "parallel / incremental", "incremental / floor"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// A pair whose join did not finish is left out and said so; one threshold recounts every run.
func TestCompareSkipsUnfinishedJoinsAndTakesOneThreshold(t *testing.T) {
	rep := scenario.Report{Runs: []scenario.RunReport{
		joinRun("incremental", 2, 6, 100, true, 0, 0, 150, 0, 0, 0),
		joinRun("parallel", 2, 6, 200, true, 0, 0, 150, 150, 0, 0),
		joinRun("incremental", 2, 6, 100, false, 0, 0, 150, 0, 0, 0),
		joinRun("parallel", 2, 6, 100, true, 0, 0, 150, 150, 0, 0),
	}}
	paths := writeReports(t, rep)
	c, err := Compare(paths, CompareOptions{A: "incremental", B: "parallel"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pairs) != 1 || len(c.Skipped) != 1 || !strings.Contains(c.Skipped[0], "did not finish") {
		t.Fatalf("pairs %d, skipped %v", len(c.Pairs), c.Skipped)
	}
	if c.Pairs[0].B.Windows != 0 {
		t.Errorf("parallel at its own 200 ms: %d windows, want 0", c.Pairs[0].B.Windows)
	}
	c, err = Compare(paths, CompareOptions{A: "incremental", B: "parallel", ThresholdMs: 120})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Pairs[0]; p.B.Windows != 2 || p.B.ThresholdMs != 120 || p.A.Windows != 1 {
		t.Errorf("at 120 ms: %+v / %+v", p.A, p.B)
	}
}

func TestCompareRefusesWhatCannotPair(t *testing.T) {
	paths := writeReports(t, scenario.Report{Runs: []scenario.RunReport{joinRun("incremental", 2, 6, 100, true, 0, 0, 150)}})
	for _, o := range []CompareOptions{
		{A: "incremental", B: "incremental"},
		{A: "incremental"},
		{A: "incremental", B: "parallel"},
		{A: "incremental", B: "parallel", Control: "no-join"},
	} {
		if _, err := Compare(paths, o); err == nil {
			t.Errorf("%+v: compared", o)
		}
	}
	if _, err := Compare([]string{filepath.Join(t.TempDir(), "missing.json")}, CompareOptions{A: "a", B: "b"}); err == nil {
		t.Error("a missing report compared")
	}
}
