package profiles

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/report"
)

// MeT's results (Cruz 2016, §3.5) as this experiment's goals: node_profiles' throughput at least
// GoalOverBest times the best homogeneous arm's (+35 %) and GoalOverRandom times the
// random-homogeneous arm's, and during the reconfiguration no 10-s bin below GoalMinShare of the
// level before it (the thesis stayed within 8 %) and no failed request.
const (
	GoalOverBest   = 1.35
	GoalOverRandom = 2.0
	GoalMinShare   = 0.9
)

// Spread is one figure over repeated runs: report.Spread's median (the mean of the middle two for
// an even count) and range, and each run's value in run order.
type Spread struct {
	report.Spread
	Runs []float64 `json:"runs"`
}

// spreadOf is the Spread of vs (zero for none).
func spreadOf(vs []float64) Spread {
	return Spread{Spread: report.SpreadOf(vs), Runs: slices.Clone(vs)}
}

// Repeated is the experiment's figures over repeated runs, judged on their medians: one run is
// one sample of a machine whose run-to-run spread can be wider than a goal's margin, so a goal is
// met only by the median of the runs (and no failed request by every run).
type Repeated struct {
	Runs int `json:"runs"`
	// NodeProfiles, Best and Random are the three arms' throughput (ops/s); BestArms names each
	// run's best homogeneous arm.
	NodeProfiles Spread   `json:"node_profiles_ops_s"`
	Best         Spread   `json:"best_homogeneous_ops_s"`
	Random       Spread   `json:"random_homogeneous_ops_s"`
	BestArms     []string `json:"best_homogeneous_arms"`
	// OverBest, OverRandom and ScanOverBest are each run's gains (Report.Gains); MinShare its
	// reconfiguration's lowest 10-s bin as a share of the level before; Failed its failed requests
	// over the whole run.
	OverBest     Spread `json:"over_best_homogeneous"`
	OverRandom   Spread `json:"over_random_homogeneous"`
	ScanOverBest Spread `json:"scan_tenant_over_best_homogeneous"`
	MinShare     Spread `json:"min_share"`
	Failed       Spread `json:"failed"`
	// Converged counts the runs whose reconfiguration converged within its time.
	Converged int `json:"converged"`
	// Met is each goal's verdict: "over_best_homogeneous", "over_random_homogeneous" and
	// "min_share" on the median, "no_failed_request" on every run.
	Met map[string]bool `json:"met"`
	// Incomplete counts the runs whose report lacks an arm the gains need (they are left out of
	// every figure).
	Incomplete int `json:"incomplete,omitempty"`
}

// Summarize is reps' figures over the runs (see Repeated).
func Summarize(reps []Report) Repeated {
	var np, best, rnd, ob, or, scan, share, failed []float64
	out := Repeated{Met: map[string]bool{}}
	for _, r := range reps {
		byName := map[string]Arm{}
		for _, a := range r.Arms {
			byName[a.Name] = a
		}
		_, okOver := r.Gains["over_best_homogeneous"]
		if !okOver || byName[r.BestHomogeneous].Name == "" {
			out.Incomplete++
			continue
		}
		out.Runs++
		np = append(np, byName["node_profiles"].Throughput)
		best = append(best, byName[r.BestHomogeneous].Throughput)
		rnd = append(rnd, byName["random-homogeneous"].Throughput)
		out.BestArms = append(out.BestArms, r.BestHomogeneous)
		ob = append(ob, r.Gains["over_best_homogeneous"])
		or = append(or, r.Gains["over_random_homogeneous"])
		if g, ok := r.Gains["scan_tenant_over_best_homogeneous"]; ok {
			scan = append(scan, g)
		}
		share = append(share, r.Reconfiguration.MinShare)
		failed = append(failed, float64(r.Failed))
		if r.Reconfiguration.Converged {
			out.Converged++
		}
	}
	out.NodeProfiles, out.Best, out.Random = spreadOf(np), spreadOf(best), spreadOf(rnd)
	out.OverBest, out.OverRandom, out.ScanOverBest = spreadOf(ob), spreadOf(or), spreadOf(scan)
	out.MinShare, out.Failed = spreadOf(share), spreadOf(failed)
	if out.Runs > 0 {
		out.Met["over_best_homogeneous"] = out.OverBest.Median >= GoalOverBest
		out.Met["over_random_homogeneous"] = out.OverRandom.Median >= GoalOverRandom
		out.Met["min_share"] = out.MinShare.Median >= GoalMinShare
		out.Met["no_failed_request"] = out.Failed.Max == 0
	}
	return out
}

// Print writes the summary a line a figure: median, range and each run, and the verdicts.
func (r Repeated) Print(w io.Writer) error {
	verdict := func(goal string) string {
		if r.Met[goal] {
			return "met"
		}
		return "not met"
	}
	line := func(name string, s Spread, format, tail string) string {
		runs := make([]string, len(s.Runs))
		for i, v := range s.Runs {
			runs[i] = fmt.Sprintf(format, v)
		}
		return fmt.Sprintf("%-34s median "+format+" (range "+format+"–"+format+"; runs %v)%s\n", name, s.Median, s.Min, s.Max, runs, tail)
	}
	lines := []string{
		fmt.Sprintf("%d runs of the experiment (%d incomplete, left out); best homogeneous arm per run: %v\n", r.Runs, r.Incomplete, r.BestArms),
		line("node_profiles ops/s", r.NodeProfiles, "%.0f", ""),
		line("best homogeneous ops/s", r.Best, "%.0f", ""),
		line("random-homogeneous ops/s", r.Random, "%.0f", ""),
		line("× best homogeneous", r.OverBest, "%.2f", fmt.Sprintf("; goal ≥ %.2f on the median: %s", GoalOverBest, verdict("over_best_homogeneous"))),
		line("× random-homogeneous", r.OverRandom, "%.2f", fmt.Sprintf("; goal ≥ %.2f on the median: %s", GoalOverRandom, verdict("over_random_homogeneous"))),
		line("scan tenant × best homogeneous", r.ScanOverBest, "%.2f", ""),
		line("lowest 10-s bin (share)", r.MinShare, "%.2f", fmt.Sprintf("; goal ≥ %.2f on the median: %s", GoalMinShare, verdict("min_share"))),
		line("failed requests", r.Failed, "%.0f", "; goal 0 in every run: "+verdict("no_failed_request")),
		fmt.Sprintf("%-34s %d of %d runs\n", "reconfiguration converged", r.Converged, r.Runs),
	}
	for _, l := range lines {
		if _, err := io.WriteString(w, l); err != nil {
			return err
		}
	}
	return nil
}

// Write writes r as indented JSON to path.
func (r Repeated) Write(path string) error { return benchutil.WriteJSON(path, r) }

// IsReport reports whether the JSON in b is a report of this experiment (its reconfiguration and
// gains), not of another scenario.
func IsReport(b []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return false
	}
	_, rc := top["reconfiguration"]
	_, g := top["gains"]
	return rc && g
}

// LoadReports reads the reports at paths (each a report.json this experiment wrote).
func LoadReports(paths []string) ([]Report, error) {
	var out []Report
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if !IsReport(b) {
			return nil, fmt.Errorf("%s: not a report of the node-profiles experiment", p)
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, r)
	}
	return out, nil
}
