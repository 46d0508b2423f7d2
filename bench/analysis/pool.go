package analysis

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/bench/scenario"
)

// RepeatReport is what repeat.json holds: per run label (a variant's name, or policy=on/off), every
// figure's statistics over the repetitions, and where each repetition's report is.
type RepeatReport struct {
	Scenario    string                     `json:"scenario"`
	Repetitions int                        `json:"repetitions"`
	Reports     []string                   `json:"reports"`
	Labels      []string                   `json:"labels"` // in the first repetition's order
	Stats       map[string]map[string]Stat `json:"stats"`  // label → figure → statistics
	// CommonSLOThresholdMs is the one threshold the *_common figures count against: the mean of the
	// runs' own (a run's own threshold moves with its steady state, and a run with a fast steady
	// state would count more windows for the same latencies; the chapter scored every run against
	// one fixed target).
	CommonSLOThresholdMs float64 `json:"common_slo_threshold_ms,omitempty"`
	// Paired pools, per label, the toggled windows' pairs of every run (all, and the low-steal ones).
	Paired         map[string]*report.PairedCost `json:"paired,omitempty"`
	PairedLowSteal map[string]*report.PairedCost `json:"paired_low_steal,omitempty"`
}

// figure is one number of a run, when it has it.
type figure struct {
	name string
	get  func(r scenario.RunReport, commonMs float64) (float64, bool)
}

func joinFigure(f func(*scenario.JoinReport) float64) func(scenario.RunReport, float64) (float64, bool) {
	return func(r scenario.RunReport, _ float64) (float64, bool) {
		if r.Join == nil || !r.Join.Done {
			return 0, false // a join that did not finish has no join time, dip or score to average
		}
		return f(r.Join), true
	}
}

// commonScore recounts the SLO windows of the join (or their excess) against the common threshold.
func commonScore(excess bool) func(scenario.RunReport, float64) (float64, bool) {
	return func(r scenario.RunReport, thr float64) (float64, bool) {
		if r.Join == nil || !r.Join.Done || thr <= 0 {
			return 0, false
		}
		n, ex := report.WindowsOver(r.Series, thr, r.Join.JoinStartS, r.Join.JoinStartS+r.Join.JoinS)
		return map[bool]float64{false: float64(n), true: ex}[excess], true
	}
}

// figures are the figures aggregated, in the order printed.
var figures = []figure{
	{"throughput", func(r scenario.RunReport, _ float64) (float64, bool) { return r.Summary.Throughput, true }},
	{"p99_ms", func(r scenario.RunReport, _ float64) (float64, bool) { return r.Summary.P99Ms, true }},
	{"task_throughput_ratio", func(r scenario.RunReport, _ float64) (float64, bool) { return taskRatio(r.Task, false) }},
	{"task_p99_ratio", func(r scenario.RunReport, _ float64) (float64, bool) { return taskRatio(r.Task, true) }},
	{"join_s", joinFigure(func(j *scenario.JoinReport) float64 { return j.JoinS })},
	{"first_served_s", joinFigure(func(j *scenario.JoinReport) float64 { return j.FirstServedS })},
	{"full_share_s", joinFigure(func(j *scenario.JoinReport) float64 { return j.FullShareS })},
	{"worst_dip", joinFigure(func(j *scenario.JoinReport) float64 { return j.WorstDip })},
	{"dip_noise", joinFigure(func(j *scenario.JoinReport) float64 { return j.DipNoise })},
	{"dip_beyond_noise", joinFigure(func(j *scenario.JoinReport) float64 { return j.DipBeyondNoise })},
	{"throughput_ratio", joinFigure(func(j *scenario.JoinReport) float64 { return j.ThroughputRatio })},
	{"violating_windows", joinFigure(func(j *scenario.JoinReport) float64 { return float64(j.ViolatingWindows) })},
	{"excess_ms", joinFigure(func(j *scenario.JoinReport) float64 { return j.ExcessMs })},
	{"post_join_ratio", joinFigure(func(j *scenario.JoinReport) float64 { return j.PostJoinRatio })},
	{"violating_windows_common", commonScore(false)},
	{"excess_common_ms", commonScore(true)},
	{"read_hints_first_1s_ratio", readHintsFigure(func(h *scenario.ReadHintsRun) float64 { return h.First1sRatio })},
	{"read_hints_first_5s_ratio", readHintsFigure(func(h *scenario.ReadHintsRun) float64 { return h.First5sRatio })},
	{"read_hints_new_leader_hit_first_5s", readHintsFigure(func(h *scenario.ReadHintsRun) float64 { return deref(h.NewLeaderHitRatioFirst5s) })},
}

func readHintsFigure(f func(*scenario.ReadHintsRun) float64) func(scenario.RunReport, float64) (float64, bool) {
	return func(r scenario.RunReport, _ float64) (float64, bool) {
		if r.ReadHints == nil || r.ReadHints.Change == "" || r.ReadHints.Paired != nil {
			return 0, false
		}
		v := f(r.ReadHints)
		return v, !math.IsNaN(v)
	}
}

// taskRatio is a task window's throughput or p99 ratio, when it has one.
func taskRatio(t *scenario.TaskWindow, p99 bool) (float64, bool) {
	if t == nil || t.ThroughputRatio == 0 {
		return 0, false
	}
	if p99 {
		return t.P99Ratio, true
	}
	return t.ThroughputRatio, true
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// Aggregate computes a RepeatReport from the reports of one scenario's repetitions, written at paths.
func Aggregate(name string, reps []*scenario.Report, paths []string) *RepeatReport {
	out := &RepeatReport{Scenario: name, Repetitions: len(reps), Reports: paths, Stats: map[string]map[string]Stat{}}
	var thr []float64
	for _, rep := range reps {
		for _, r := range rep.Runs {
			if r.Join != nil && r.Join.Done && r.Join.SLOThresholdMs > 0 {
				thr = append(thr, r.Join.SLOThresholdMs)
			}
		}
	}
	if len(thr) > 0 {
		m, _ := report.MeanSD(thr)
		out.CommonSLOThresholdMs = math.Round(m*1000) / 1000
	}
	samples := map[string]map[string][]float64{}
	costs := map[string][2][]float64{}
	for _, rep := range reps {
		for _, r := range rep.Runs {
			l := r.Label()
			if samples[l] == nil {
				samples[l] = map[string][]float64{}
				out.Labels = append(out.Labels, l)
			}
			for _, f := range figures {
				if v, ok := f.get(r, out.CommonSLOThresholdMs); ok {
					samples[l][f.name] = append(samples[l][f.name], v)
				}
			}
			if h := r.ReadHints; h != nil && h.Paired != nil {
				c := costs[l]
				c[0] = append(c[0], h.Paired.Costs...)
				if h.PairedLowSteal != nil {
					c[1] = append(c[1], h.PairedLowSteal.Costs...)
				}
				costs[l] = c
			}
		}
	}
	for l, figs := range samples {
		out.Stats[l] = map[string]Stat{}
		for f, xs := range figs {
			out.Stats[l][f] = newStat(xs)
		}
	}
	for l, c := range costs {
		if out.Paired == nil {
			out.Paired, out.PairedLowSteal = map[string]*report.PairedCost{}, map[string]*report.PairedCost{}
		}
		out.Paired[l], out.PairedLowSteal[l] = report.PairedCostOf(c[0], "pooled"), report.PairedCostOf(c[1], "pooled")
	}
	return out
}

// Write writes the report as indented JSON.
func (r *RepeatReport) Write(path string) error { return benchutil.WriteJSON(path, r) }

// Pool aggregates finished runs of one scenario from their report.json files, as Aggregate does for
// a --repeat's own repetitions: runs of several invocations, or the repetitions an interrupted repeat
// finished. Reports of different scenarios do not pool.
func Pool(paths []string) (*RepeatReport, error) {
	if len(paths) < 2 {
		return nil, fmt.Errorf("pool: %d reports; at least 2 make a spread", len(paths))
	}
	var reps []*scenario.Report
	for _, p := range paths {
		rep, err := readReport("pool", p)
		if err != nil {
			return nil, err
		}
		if len(reps) > 0 && rep.Scenario != reps[0].Scenario {
			return nil, fmt.Errorf("pool: %s is a report of %q, %s of %q: reports of different scenarios do not pool",
				p, rep.Scenario, paths[0], reps[0].Scenario)
		}
		reps = append(reps, rep)
	}
	return Aggregate(reps[0].Scenario, reps, paths), nil
}

// Print writes the statistics as a table: one line per run label and figure, then the pooled pairs.
func (r *RepeatReport) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\tfigure\tn\tmedian\tmean\tsd\tmin\tmax\t\n")
	for _, l := range r.Labels {
		for _, f := range figures {
			if s, ok := r.Stats[l][f.name]; ok {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%.4g\t%.4g\t%.3g\t%.4g\t%.4g\t\n", l, f.name, s.N, s.Median, s.Mean, s.SD, s.Min, s.Max)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.CommonSLOThresholdMs > 0 {
		fmt.Fprintf(w, "(*_common: every run's 1-s p99 windows against one threshold, %.1f ms, the runs' mean)\n", r.CommonSLOThresholdMs)
	}
	for _, l := range r.Labels {
		if c := r.Paired[l]; c != nil {
			fmt.Fprintf(w, "%s, all pairs: %s\n", l, c)
		}
		if c := r.PairedLowSteal[l]; c != nil {
			fmt.Fprintf(w, "%s, pairs with steal under %.0f%%: %s\n", l, 100*scenario.LowStealMax, c)
		}
	}
	return nil
}
