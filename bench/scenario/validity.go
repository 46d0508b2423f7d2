package scenario

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/shoaldb/shoal/bench/report"
)

// A figure measured against a "steady state" means nothing when that state swings: on a small store
// every flush can trigger a compaction of the whole store on all nodes at once, throughput then
// oscillates with the flush period, and a task window lands on whatever phase it lands on. So every
// run checks its own footing, and a run that fails a check fails loudly (ErrInvalid) with its report
// written: the report still shows what happened, the verdict says whether its figures count.

// The bounds of the checks.
const (
	maxSteadyGap = 0.10 // the runs' steady states: the largest median over the smallest, minus one
	minHeavier   = 2.0  // the busiest node's disk bytes/s in the task window over the window before it
)

// ErrInvalid marks a run or report whose figures do not count: a validity check failed.
var ErrInvalid = errors.New("validity check failed")

// taskChecks judges a run with a task event: it recorded its task window, and (heavy: a background
// task) the task was heavier than the background: on its node (or, when the event names none, the
// node whose disk traffic rose most), bytes/s in the window at least minHeavier times those of the
// window of the same length before it (not before the warm-up). The largest rise is no proxy for a
// named node: with leaderships shed, the node that took them rises more than the busy one.
func taskChecks(rr *RunReport, warmup float64, heavy bool) []Check {
	t := rr.Task
	switch {
	case t == nil:
		return []Check{report.NewCheck("task_window", 0, 1, false, "no task window: the run has no task event")}
	case t.Missing != "":
		return []Check{report.NewCheck("task_window", 0, 1, false, t.Missing)}
	}
	out := []Check{report.NewCheck("task_window", t.DurationS, 1, true, "")}
	if !heavy {
		return out
	}
	from := max(warmup, t.StartS-t.DurationS)
	best, node, what := 0.0, uint64(0), ""
	var during, before float64
	for _, m := range measuresOf(rr) {
		for i := range nodeCount(rr.Series) {
			if t.Node != 0 && nodeAt(rr.Series, i) != t.Node {
				continue
			}
			// The window runs to the midpoint of the second the task ended in: a compaction's
			// bytes count when it finishes, and a full compaction's last one is most of them.
			end := max(math.Ceil(t.EndS)-0.5, t.StartS+1)
			d, b := rateOf(rr.Series, i, t.StartS, end, m.bytes), rateOf(rr.Series, i, from, t.StartS, m.bytes)
			if d > 0 && b == 0 {
				// Nothing of the kind before it (a node whose automatic compactions paused): any
				// amount is heavier, by a ratio taken against one byte a second.
				b = 1
			}
			if b > 0 && d/b > best {
				best, during, before, node, what = d/b, d, b, nodeAt(rr.Series, i), m.name
			}
		}
	}
	if best == 0 {
		return append(out, report.NotApplicable("event_heavier", "no emulated-disk or compaction traffic recorded"))
	}
	return append(out, report.NewCheck("event_heavier", best, minHeavier, best >= minHeavier,
		fmt.Sprintf("n%d: %.1f vs %.1f MiB/s %s", node, during/(1<<20), before/(1<<20), what)))
}

type heavierMeasure struct {
	name  string
	bytes func(NodeSecond) int64
}

// heavierMeasures are what a heavy task may raise on its node: a backup reads (the emulated disk's
// bytes), a compaction rewrites (its bytes compacted, which the page cache can hide from the disk).
var heavierMeasures = []heavierMeasure{
	{"read+written", func(n NodeSecond) int64 { return n.DiskBytes }},
	{"compacted", func(n NodeSecond) int64 { return n.CompactedBytes }},
}

// measuresOf is what the run's task may be judged by: a backup only by its node's disk bytes. A
// backup rewrites nothing, so a compaction its node happened to run in the window (against none
// before it) is the background's, and would pass it by a ratio against one byte a second.
func measuresOf(rr *RunReport) []heavierMeasure {
	i := slices.IndexFunc(rr.Events, func(e EventMark) bool { return e.Task })
	if i >= 0 && rr.Events[i].Label == string(BackupBusiest) {
		return heavierMeasures[:1]
	}
	return heavierMeasures
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

// rateOf is node i's bytes per second by bytes over the seconds whose midpoint lies in [from, to].
func rateOf(series []Point, i int, from, to float64, bytes func(NodeSecond) int64) float64 {
	var sum, n float64
	for _, p := range series {
		if mid := p.T - 0.5; mid >= from && mid <= to && i < len(p.Nodes) {
			sum, n = sum+float64(bytes(p.Nodes[i])), n+1
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
		return report.NotApplicable("steady_agreement", "fewer than two kinds of run to compare")
	}
	lo, hi, names := math.Inf(1), 0.0, []string{}
	for l, xs := range by {
		m := report.Median(xs)
		lo, hi = min(lo, m), max(hi, m)
		names = append(names, fmt.Sprintf("%s %.0f", l, m))
	}
	slices.Sort(names)
	gap := hi/lo - 1
	return report.NewCheck("steady_agreement", gap, maxSteadyGap, gap <= maxSteadyGap, "median ops/s: "+strings.Join(names, ", "))
}

// failures lists the failed checks of a report, each with its run.
func failures(rep *Report) []string {
	var out []string
	for _, c := range rep.Checks {
		if c.Verdict == report.Fail {
			out = append(out, c.String())
		}
	}
	for _, r := range rep.Runs {
		for _, c := range r.Validity.checks() {
			if c.Verdict == report.Fail {
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
		if !slices.ContainsFunc(r.Validity.checks(), func(c Check) bool { return c.Verdict == report.Fail }) {
			out[i].Valid++
		}
		f := &figs[i]
		f[0], f[1], f[2] = append(f[0], t.DurationS), append(f[1], t.ThroughputRatio), append(f[2], t.P99Ratio)
	}
	for i, f := range figs {
		out[i].DurationS, out[i].ThroughputRatio, out[i].P99Ratio = report.SpreadOf(f[0]), report.SpreadOf(f[1]), report.SpreadOf(f[2])
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
