package scenario

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/shoaldb/shoal/bench/benchutil"
)

// A figure measured against a "steady state" means nothing when that state swings: on a small store
// every flush can trigger a compaction of the whole store on all nodes at once, throughput then
// oscillates with the flush period, and a task window lands on whatever phase it lands on. So every
// run checks its own footing, and a run that fails a check fails loudly (ErrInvalid) with its report
// written: the report still shows what happened, the verdict says whether its figures count.

// The bounds of the checks.
const (
	maxSteadyCV     = 0.10 // the pre-event window's 1-s throughput: coefficient of variation …
	maxPeriodic     = 0.10 // … and amplitude of its largest periodic component, both relative to its mean
	maxSteadyGap    = 0.10 // the runs' steady states: the largest median over the smallest, minus one
	minHeavier      = 2.0  // the busiest node's disk bytes/s in the task window over the window before it
	minSteadyPoints = 10   // fewer seconds before the event leave nothing to judge
)

// ErrInvalid marks a run or report whose figures do not count: a validity check failed.
var ErrInvalid = errors.New("validity check failed")

// Verdicts of a check.
const (
	Pass = "pass"
	Fail = "FAIL"
	NA   = "n/a" // nothing to judge (Note says why); not a failure
)

// Check is one validity check: the value it measured against its limit, and its verdict.
type Check struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Limit   float64 `json:"limit"`
	Verdict string  `json:"verdict"`
	Note    string  `json:"note,omitempty"`
}

func (c Check) String() string {
	s := fmt.Sprintf("%s %.3g (limit %.3g) %s", c.Name, c.Value, c.Limit, c.Verdict)
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return s
}

func check(name string, v, limit float64, ok bool, note string) Check {
	c := Check{Name: name, Value: v, Limit: limit, Verdict: Fail, Note: note}
	if ok {
		c.Verdict = Pass
	}
	return c
}

func notApplicable(name, why string) Check { return Check{Name: name, Verdict: NA, Note: why} }

// Steady is a run's pre-event window (from the warm-up to its first event after it): its 1-s
// throughput's mean, coefficient of variation and largest periodic component (relative amplitude
// and period).
type Steady struct {
	FromS       float64 `json:"from_s"`
	ToS         float64 `json:"to_s"`
	Throughput  float64 `json:"throughput"`
	CV          float64 `json:"cv"`
	PeriodicAmp float64 `json:"periodic_amplitude"`
	PeriodS     float64 `json:"period_s"`
}

// steadyOf measures the seconds of series that lie wholly within [from, to].
func steadyOf(series []Point, from, to float64) Steady {
	var ops []float64
	for _, p := range series {
		if p.T-1 >= from && p.T <= to {
			ops = append(ops, float64(p.Ops))
		}
	}
	st := Steady{FromS: from, ToS: to}
	if len(ops) < 2 {
		return st
	}
	mean, sd := benchutil.MeanSD(ops)
	st.Throughput = mean
	if mean > 0 {
		st.CV = sd / mean
		amp, period := periodic(ops)
		st.PeriodicAmp, st.PeriodS = amp/mean, period
	}
	return st
}

// periodic is the largest sinusoid in xs (one sample a second): its amplitude and period, from a
// least-squares fit of a sine and a cosine at each frequency from one cycle per window to one per
// two seconds, a quarter of the DFT's spacing apart (a Lomb–Scargle periodogram: unlike the DFT's
// bins it finds a period that does not divide the window at its full amplitude).
func periodic(xs []float64) (amp, period float64) {
	n := float64(len(xs))
	mean, _ := benchutil.MeanSD(xs)
	for i := 4.0; i <= 2*n; i++ {
		f := i / (4 * n)
		var cc, cs, ss, xc, xsn float64
		for t, x := range xs {
			c, s := math.Cos(2*math.Pi*f*float64(t)), math.Sin(2*math.Pi*f*float64(t))
			cc, cs, ss, xc, xsn = cc+c*c, cs+c*s, ss+s*s, xc+(x-mean)*c, xsn+(x-mean)*s
		}
		var a, b float64
		if det := cc*ss - cs*cs; ss > 1e-6*cc && det > 1e-6*cc*ss {
			a, b = (xc*ss-xsn*cs)/det, (xsn*cc-xc*cs)/det
		} else if cc > 0 { // near two seconds the sine (nearly) vanishes at every sample
			a = xc / cc
		}
		if m := math.Hypot(a, b); m > amp {
			amp, period = m, 1/f
		}
	}
	return amp, period
}

// steadyChecks judges a run's steady state.
func steadyChecks(st Steady) []Check {
	if n := st.ToS - st.FromS; n < minSteadyPoints {
		why := fmt.Sprintf("%.0f s before the first event after the warm-up: too short to judge", max(n, 0))
		return []Check{notApplicable("steady_cv", why), notApplicable("steady_periodic", why)}
	}
	return []Check{
		check("steady_cv", st.CV, maxSteadyCV, st.CV <= maxSteadyCV, fmt.Sprintf("%.0f-%.0fs, %.0f ops/s", st.FromS, st.ToS, st.Throughput)),
		check("steady_periodic", st.PeriodicAmp, maxPeriodic, st.PeriodicAmp <= maxPeriodic, fmt.Sprintf("period %.1fs", st.PeriodS)),
	}
}

// taskChecks judges a run with a task event: it recorded its task window, and (heavy: a background
// task) the task was heavier than the background: on its node (or, when the event names none, the
// node whose disk traffic rose most), bytes/s in the window at least minHeavier times those of the
// window of the same length before it (not before the warm-up). The largest rise is no proxy for a
// named node: with leaderships shed, the node that took them rises more than the busy one.
func taskChecks(rr *RunReport, warmup float64, heavy bool) []Check {
	t := rr.Task
	switch {
	case t == nil:
		return []Check{check("task_window", 0, 1, false, "no task window: the run has no task event")}
	case t.Missing != "":
		return []Check{check("task_window", 0, 1, false, t.Missing)}
	}
	out := []Check{check("task_window", t.DurationS, 1, true, "")}
	if !heavy {
		return out
	}
	from := max(warmup, t.StartS-t.DurationS)
	best, node := 0.0, uint64(0)
	var during, before float64
	for i := range nodeCount(rr.Series) {
		d, b := diskRate(rr.Series, i, t.StartS, max(t.EndS, t.StartS+1)), diskRate(rr.Series, i, from, t.StartS)
		if t.Node != 0 && nodeAt(rr.Series, i) != t.Node {
			continue
		}
		if b > 0 && d/b > best {
			best, during, before, node = d/b, d, b, nodeAt(rr.Series, i)
		}
	}
	if best == 0 {
		return append(out, notApplicable("event_heavier", "no emulated-disk traffic recorded (no emulated disks)"))
	}
	return append(out, check("event_heavier", best, minHeavier, best >= minHeavier,
		fmt.Sprintf("n%d: %.1f vs %.1f MiB/s read+written", node, during/(1<<20), before/(1<<20))))
}

// nodeAt is the id of the node at index i of the series' seconds (0 while it was down).
func nodeAt(series []Point, i int) uint64 {
	for _, p := range slices.Backward(series) {
		if i < len(p.Nodes) && p.Nodes[i].Node != 0 {
			return p.Nodes[i].Node
		}
	}
	return 0
}

func nodeCount(series []Point) int {
	n := 0
	for _, p := range series {
		n = max(n, len(p.Nodes))
	}
	return n
}

// diskRate is node i's emulated-disk bytes per second over the seconds whose midpoint lies in [from, to].
func diskRate(series []Point, i int, from, to float64) float64 {
	var sum, n float64
	for _, p := range series {
		if mid := p.T - 0.5; mid >= from && mid <= to && i < len(p.Nodes) {
			sum, n = sum+float64(p.Nodes[i].DiskBytes), n+1
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// agreementCheck judges a report: its runs' steady states agree (the median of each label's).
func agreementCheck(runs []RunReport) Check {
	by := map[string][]float64{}
	for _, r := range runs {
		if r.Validity != nil && r.Validity.Steady.Throughput > 0 {
			by[r.Label()] = append(by[r.Label()], r.Validity.Steady.Throughput)
		}
	}
	if len(by) < 2 {
		return notApplicable("steady_agreement", "fewer than two kinds of run to compare")
	}
	lo, hi, names := math.Inf(1), 0.0, []string{}
	for l, xs := range by {
		m := benchutil.Median(xs)
		lo, hi = min(lo, m), max(hi, m)
		names = append(names, fmt.Sprintf("%s %.0f", l, m))
	}
	slices.Sort(names)
	gap := hi/lo - 1
	return check("steady_agreement", gap, maxSteadyGap, gap <= maxSteadyGap, "median ops/s: "+strings.Join(names, ", "))
}

// failures lists the failed checks of a report, each with its run.
func failures(rep *Report) []string {
	var out []string
	for _, c := range rep.Checks {
		if c.Verdict == Fail {
			out = append(out, c.String())
		}
	}
	for _, r := range rep.Runs {
		for _, c := range r.Validity.checks() {
			if c.Verdict == Fail {
				out = append(out, r.name()+": "+c.String())
			}
		}
	}
	return out
}

// printChecks writes a run's checks on one line.
func printChecks(w io.Writer, label string, cs []Check) {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	fmt.Fprintf(w, "%s: validity: %s\n", label, strings.Join(parts, "; "))
}

// Validity is a run's steady state and its checks.
type Validity struct {
	Steady Steady  `json:"steady"`
	Checks []Check `json:"checks"`
}

func (v *Validity) checks() []Check {
	if v == nil {
		return nil
	}
	return v.Checks
}

// Spread is a figure over several runs: its median and range.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// SpreadOf is the spread of xs (zero for none).
func SpreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	return Spread{N: len(xs), Median: benchutil.Median(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
}

// TaskSpread is one label's task windows over its runs (one per offset of the event): the
// comparison a scenario's result rests on, whatever the phase of the background at any one event.
type TaskSpread struct {
	Label string `json:"label"`
	// Valid counts the runs that passed every check of their own.
	Valid           int    `json:"valid_runs"`
	DurationS       Spread `json:"duration_s"`
	ThroughputRatio Spread `json:"throughput_ratio"`
	P99Ratio        Spread `json:"p99_ratio"`
}

func taskSpreads(runs []RunReport) []TaskSpread {
	var out []TaskSpread
	var figs [][3][]float64
	for _, r := range runs {
		t := r.Task
		if t == nil || t.ThroughputRatio == 0 {
			continue
		}
		i := slices.IndexFunc(out, func(s TaskSpread) bool { return s.Label == r.Label() })
		if i < 0 {
			i, out, figs = len(out), append(out, TaskSpread{Label: r.Label()}), append(figs, [3][]float64{})
		}
		if !slices.ContainsFunc(r.Validity.checks(), func(c Check) bool { return c.Verdict == Fail }) {
			out[i].Valid++
		}
		f := &figs[i]
		f[0], f[1], f[2] = append(f[0], t.DurationS), append(f[1], t.ThroughputRatio), append(f[2], t.P99Ratio)
	}
	for i, f := range figs {
		out[i].DurationS, out[i].ThroughputRatio, out[i].P99Ratio = SpreadOf(f[0]), SpreadOf(f[1]), SpreadOf(f[2])
	}
	return out
}

// printReport writes what a report shows over its runs and, loudly, every failed check.
func printReport(w io.Writer, rep *Report) {
	if w == nil {
		return
	}
	for _, t := range rep.Tasks {
		d, tp, p := t.DurationS, t.ThroughputRatio, t.P99Ratio
		fmt.Fprintf(w, "%s %s, %d runs (%d valid), median [range]: task %.1fs [%.1f, %.1f], throughput %.1f%% [%.1f, %.1f] of steady, p99 %.2fx [%.2f, %.2f]\n",
			rep.Scenario, t.Label, tp.N, t.Valid, d.Median, d.Min, d.Max, 100*tp.Median, 100*tp.Min, 100*tp.Max, p.Median, p.Min, p.Max)
	}
	printChecks(w, rep.Scenario, rep.Checks)
	if bad := failures(rep); len(bad) > 0 {
		fmt.Fprintf(w, "*** %s: INVALID: %d validity check(s) failed; the figures above do not count:\n", rep.Scenario, len(bad))
		for _, b := range bad {
			fmt.Fprintf(w, "***   %s\n", b)
		}
	}
}

// mib formats byte counts as MiB.
func mib(bs []int64) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("%.1f", float64(b)/(1<<20))
	}
	return strings.Join(parts, " ")
}
