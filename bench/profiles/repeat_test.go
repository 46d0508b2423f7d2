package profiles

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run is a report with the three arms the gains need, as Run fills it.
func run(np, best, rnd, scanGain, minShare float64, failed int64, converged bool) Report {
	r := Report{BestHomogeneous: "homogeneous-scan", Failed: failed,
		Arms: []Arm{{Name: "random-homogeneous", Throughput: rnd}, {Name: "homogeneous-scan", Throughput: best},
			{Name: "node_profiles", Throughput: np}},
		Gains: map[string]float64{"over_best_homogeneous": np / best, "over_random_homogeneous": np / rnd,
			"scan_tenant_over_best_homogeneous": scanGain},
		Reconfiguration: Reconfiguration{MinShare: minShare, Converged: converged}}
	return r
}

func TestSummarize(t *testing.T) {
	// The three runs of docs/bench-profiles.md's table (node_profiles, homogeneous-scan, random).
	three := []Report{run(205, 298, 216, 0.57, 0.56, 1, false), run(256, 338, 247, 0.29, 0.81, 0, false),
		run(731, 291, 268, 0.55, 0.32, 6, false)}
	good := []Report{run(420, 300, 200, 1.2, 0.93, 0, true), run(400, 290, 190, 1.1, 0.91, 0, true)}
	for _, tc := range []struct {
		name                     string
		reps                     []Report
		runs, incomplete         int
		overBest, overRandom     float64 // medians
		minShareMedian, scanGain float64
		met                      map[string]bool
	}{
		{name: "the scenario's three runs", reps: three, runs: 3, overBest: 256.0 / 338, overRandom: 256.0 / 247,
			minShareMedian: 0.56, scanGain: 0.55,
			met: map[string]bool{"over_best_homogeneous": false, "over_random_homogeneous": false, "min_share": false, "no_failed_request": false}},
		{name: "an even count: the middle two's mean", reps: good, runs: 2,
			overBest: (420.0/300 + 400.0/290) / 2, overRandom: (420.0/200 + 400.0/190) / 2, minShareMedian: 0.92, scanGain: 1.15,
			met: map[string]bool{"over_best_homogeneous": true, "over_random_homogeneous": true, "min_share": true, "no_failed_request": true}},
		{name: "a run without its arms is left out", reps: append([]Report{{Gains: map[string]float64{}}}, good...), runs: 2, incomplete: 1,
			overBest: (420.0/300 + 400.0/290) / 2, overRandom: (420.0/200 + 400.0/190) / 2, minShareMedian: 0.92, scanGain: 1.15,
			met: map[string]bool{"over_best_homogeneous": true, "over_random_homogeneous": true, "min_share": true, "no_failed_request": true}},
		{name: "no runs: no verdicts", reps: nil, met: map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.reps)
			if s.Runs != tc.runs || s.Incomplete != tc.incomplete {
				t.Fatalf("runs %d incomplete %d, want %d and %d", s.Runs, s.Incomplete, tc.runs, tc.incomplete)
			}
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"× best median", s.OverBest.Median, tc.overBest}, {"× random median", s.OverRandom.Median, tc.overRandom},
				{"min share median", s.MinShare.Median, tc.minShareMedian}, {"scan gain median", s.ScanOverBest.Median, tc.scanGain}} {
				if math.Abs(c.got-c.want) > 1e-9 {
					t.Errorf("%s %.4f, want %.4f", c.what, c.got, c.want)
				}
			}
			if len(s.Met) != len(tc.met) {
				t.Errorf("verdicts %v, want %v", s.Met, tc.met)
			}
			for g, want := range tc.met {
				if s.Met[g] != want {
					t.Errorf("%s met %v, want %v", g, s.Met[g], want)
				}
			}
		})
	}
}

func TestSummarizeRangesAndPrint(t *testing.T) {
	s := Summarize([]Report{run(205, 298, 216, 0.57, 0.56, 1, false), run(256, 338, 247, 0.29, 0.81, 0, true),
		run(731, 291, 268, 0.55, 0.32, 6, false)})
	if s.NodeProfiles.Min != 205 || s.NodeProfiles.Max != 731 || s.NodeProfiles.Median != 256 {
		t.Errorf("node_profiles spread %+v", s.NodeProfiles)
	}
	if got := s.NodeProfiles.Runs; len(got) != 3 || got[0] != 205 || got[2] != 731 {
		t.Errorf("runs in run order: %v", got)
	}
	if s.Failed.Max != 6 || s.Converged != 1 {
		t.Errorf("failed %+v converged %d", s.Failed, s.Converged)
	}
	var b strings.Builder
	if err := s.Print(&b); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	for _, want := range []string{"3 runs of the experiment", "× best homogeneous", "median 0.76", "goal ≥ 1.35 on the median: not met",
		"goal 0 in every run: not met", "1 of 3 runs"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

func TestLoadReports(t *testing.T) {
	dir := t.TempDir()
	r := run(420, 300, 200, 1.2, 0.93, 0, true)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	good, other := filepath.Join(dir, "report.json"), filepath.Join(dir, "other.json")
	if err := os.WriteFile(good, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(`{"scenario": "join", "runs": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	reps, err := LoadReports([]string{good, good})
	if err != nil {
		t.Fatal(err)
	}
	if s := Summarize(reps); s.Runs != 2 || math.Abs(s.OverBest.Median-1.4) > 1e-9 || !s.Met["no_failed_request"] {
		t.Errorf("loaded reports summarize to %+v", s)
	}
	if _, err := LoadReports([]string{good, other}); err == nil || !strings.Contains(err.Error(), "not a report of the node-profiles experiment") {
		t.Errorf("another scenario's report: %v", err)
	}
	if _, err := LoadReports([]string{filepath.Join(dir, "missing.json")}); err == nil {
		t.Error("a missing report loaded")
	}
}
