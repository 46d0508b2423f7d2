package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/shoaldb/shoal/bench/benchutil"
)

// One run of a scenario is one sample of a noisy machine: the join's worst 10-s bin before the join
// already lies 8–25 % below the mean. Repeating a scenario and reporting each figure's mean, spread
// and range (RunRepeated, Pool), pairing the runs of two variants as they ran side by side with an
// interval over the pairs (Compare), and pooling the pairs of toggled windows of several runs are
// how a claim about a few per cent becomes checkable.

// Stat is one figure over the repetitions of a run.
type Stat struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"` // sample standard deviation (0 for one sample)
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func newStat(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := Stat{N: len(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
	s.Mean, s.SD = meanSD(xs)
	return s
}

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
	Paired         map[string]*PairedCost `json:"paired,omitempty"`
	PairedLowSteal map[string]*PairedCost `json:"paired_low_steal,omitempty"`
}

// figure is one number of a run, when it has it.
type figure struct {
	name string
	get  func(r RunReport, commonMs float64) (float64, bool)
}

func joinFigure(f func(*JoinReport) float64) func(RunReport, float64) (float64, bool) {
	return func(r RunReport, _ float64) (float64, bool) {
		if r.Join == nil || !r.Join.Done {
			return 0, false // a join that did not finish has no join time, dip or score to average
		}
		return f(r.Join), true
	}
}

// commonScore recounts the SLO windows of the join (or their excess) against the common threshold.
func commonScore(excess bool) func(RunReport, float64) (float64, bool) {
	return func(r RunReport, thr float64) (float64, bool) {
		if r.Join == nil || !r.Join.Done || thr <= 0 {
			return 0, false
		}
		n, ex := windowsOver(r.Series, thr, r.Join.JoinStartS, r.Join.JoinStartS+r.Join.JoinS)
		return map[bool]float64{false: float64(n), true: ex}[excess], true
	}
}

// figures are the figures aggregated, in the order printed.
var figures = []figure{
	{"throughput", func(r RunReport, _ float64) (float64, bool) { return r.Summary.Throughput, true }},
	{"p99_ms", func(r RunReport, _ float64) (float64, bool) { return r.Summary.P99Ms, true }},
	{"join_s", joinFigure(func(j *JoinReport) float64 { return j.JoinS })},
	{"first_served_s", joinFigure(func(j *JoinReport) float64 { return j.FirstServedS })},
	{"full_share_s", joinFigure(func(j *JoinReport) float64 { return j.FullShareS })},
	{"worst_dip", joinFigure(func(j *JoinReport) float64 { return j.WorstDip })},
	{"dip_noise", joinFigure(func(j *JoinReport) float64 { return j.DipNoise })},
	{"dip_beyond_noise", joinFigure(func(j *JoinReport) float64 { return j.DipBeyondNoise })},
	{"throughput_ratio", joinFigure(func(j *JoinReport) float64 { return j.ThroughputRatio })},
	{"violating_windows", joinFigure(func(j *JoinReport) float64 { return float64(j.ViolatingWindows) })},
	{"excess_ms", joinFigure(func(j *JoinReport) float64 { return j.ExcessMs })},
	{"post_join_ratio", joinFigure(func(j *JoinReport) float64 { return j.PostJoinRatio })},
	{"violating_windows_common", commonScore(false)},
	{"excess_common_ms", commonScore(true)},
	{"read_hints_first_1s_ratio", readHintsFigure(func(h *ReadHintsRun) float64 { return h.First1sRatio })},
	{"read_hints_first_5s_ratio", readHintsFigure(func(h *ReadHintsRun) float64 { return h.First5sRatio })},
	{"read_hints_new_leader_hit_first_5s", readHintsFigure(func(h *ReadHintsRun) float64 { return deref(h.NewLeaderHitRatioFirst5s) })},
}

func readHintsFigure(f func(*ReadHintsRun) float64) func(RunReport, float64) (float64, bool) {
	return func(r RunReport, _ float64) (float64, bool) {
		if r.ReadHints == nil || r.ReadHints.Change == "" || r.ReadHints.Paired != nil {
			return 0, false
		}
		v := f(r.ReadHints)
		return v, !math.IsNaN(v)
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// runLabel names a run across repetitions.
func runLabel(r RunReport) string {
	if r.Variant != "" {
		return r.Variant
	}
	return "policy=" + onOff(r.PolicyOn)
}

// aggregate computes a RepeatReport from the repetitions' reports.
func aggregate(name string, reps []*Report, paths []string) *RepeatReport {
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
		m, _ := meanSD(thr)
		out.CommonSLOThresholdMs = round3(m)
	}
	samples := map[string]map[string][]float64{}
	costs := map[string][2][]float64{}
	for _, rep := range reps {
		for _, r := range rep.Runs {
			l := runLabel(r)
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
			out.Paired, out.PairedLowSteal = map[string]*PairedCost{}, map[string]*PairedCost{}
		}
		out.Paired[l], out.PairedLowSteal[l] = costOf(c[0], "pooled"), costOf(c[1], "pooled")
	}
	return out
}

// RunRepeated runs sc n times, repetition k into opts.Out/rep-k (its own report.json and plots) with
// the order of its runs reversed in every other repetition (so that a drift of the machine over the
// invocation favours neither), and writes opts.Out/repeat.json.
func RunRepeated(ctx context.Context, sc Scenario, opts Options, n int) (*RepeatReport, error) {
	if n < 2 {
		return nil, fmt.Errorf("repeat: %d repetitions; at least 2 make a spread", n)
	}
	var reps []*Report
	var paths []string
	for k := 1; k <= n; k++ {
		o := opts
		o.Out, o.Dir, o.Reverse = filepath.Join(opts.Out, fmt.Sprintf("rep-%d", k)), filepath.Join(opts.Dir, fmt.Sprintf("rep-%d", k)), k%2 == 0
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "repetition %d/%d of %s\n", k, n, sc.Name)
		}
		rep, err := Run(ctx, sc, o)
		if err != nil {
			return nil, fmt.Errorf("repetition %d/%d: %w", k, n, err)
		}
		// The nodes' data of a finished repetition is not needed again: keep the disk from filling.
		if err := os.RemoveAll(o.Dir); err != nil {
			return nil, err
		}
		reps, paths = append(reps, rep), append(paths, filepath.Join(o.Out, "report.json"))
	}
	out := aggregate(sc.Name, reps, paths)
	return out, out.Write(filepath.Join(opts.Out, "repeat.json"))
}

// Write writes the report as indented JSON.
func (r *RepeatReport) Write(path string) error { return benchutil.WriteJSON(path, r) }

// Pool aggregates finished runs of one scenario from their report.json files, as RunRepeated does
// for its own repetitions: runs of several invocations, or the repetitions an interrupted repeat
// finished. Reports of different scenarios do not pool.
func Pool(paths []string) (*RepeatReport, error) {
	if len(paths) < 2 {
		return nil, fmt.Errorf("pool: %d reports; at least 2 make a spread", len(paths))
	}
	var reps []*Report
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
	return aggregate(reps[0].Scenario, reps, paths), nil
}

// readReport reads a finished run's report.json for the command op (its errors name both).
func readReport(op, path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %s: not a scenario report: %w", op, path, err)
	}
	if len(rep.Runs) == 0 {
		return nil, fmt.Errorf("%s: %s: not a scenario report (no runs)", op, path)
	}
	return &rep, nil
}

// Print writes the statistics as a table: one line per run label and figure, then the pooled pairs.
func (r *RepeatReport) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\tfigure\tn\tmean\tsd\tmin\tmax\t\n")
	for _, l := range r.Labels {
		for _, f := range figures {
			if s, ok := r.Stats[l][f.name]; ok {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%.4g\t%.3g\t%.4g\t%.4g\t\n", l, f.name, s.N, s.Mean, s.SD, s.Min, s.Max)
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
			fmt.Fprintf(w, "%s, pairs with steal under %.0f%%: %s\n", l, 100*lowStealMax, c)
		}
	}
	return nil
}
