package scenario

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/shoaldb/shoal/bench/benchutil"
)

// panel draws one value of every run's series, the runs overlaid in the palette's colours.
type panel struct {
	title, ylabel string
	ratio         bool // a ratio: the axis ends at 1 and starts just below the lowest value
	value         func(Point) (float64, bool)
}

// chart is one PNG: its panels stacked, sharing the time axis.
type chart struct {
	file   string
	panels []panel
}

func latency(q func(Point) float64) func(Point) (float64, bool) {
	return func(p Point) (float64, bool) { return q(p), p.Ops > 0 }
}

var charts = []chart{
	{"throughput.png", []panel{{title: "throughput", ylabel: "ops/s", value: func(p Point) (float64, bool) { return float64(p.Ops), true }}}},
	// p99 and p50 differ by an order of magnitude: a panel each, so that both are readable.
	{"latency.png", []panel{
		{title: "p99 latency", ylabel: "ms", value: latency(func(p Point) float64 { return p.P99Ms })},
		{title: "p50 latency", ylabel: "ms", value: latency(func(p Point) float64 { return p.P50Ms })}}},
	{"hit_ratio.png", []panel{{title: "block-cache hit ratio, all nodes", ylabel: "hits / lookups", ratio: true, value: func(p Point) (float64, bool) {
		if p.HitRatio == nil {
			return 0, false
		}
		return *p.HitRatio, true
	}}}},
}

// Heights of a figure's panels: one panel alone, or each of several stacked.
const (
	panelH   = 4.5 * vg.Inch
	stackedH = 2.4 * vg.Inch
)

func heightOf(panels int) vg.Length {
	if panels == 1 {
		return panelH
	}
	return stackedH
}

// runName names a run in a legend or a title.
func runName(rep *Report, r RunReport) string {
	name := rep.Policy + " " + onOff(r.PolicyOn)
	if r.Variant != "" {
		name = r.Variant
	}
	if r.OffsetS > 0 {
		name += fmt.Sprintf(" +%.0fs", r.OffsetS)
	}
	return name
}

// yRange is the axis for values from lo to hi: from 0 (a ratio: just below lo) to hi with room
// above it for three lines of the events' labels.
func yRange(lo, hi float64, ratio bool) (float64, float64) {
	bottom := 0.0
	if lo > hi { // no data
		lo, hi = 0, 1
	}
	if ratio {
		bottom, hi = max(0, math.Floor((lo-0.02)*20)/20), 1
	}
	hi = max(hi, bottom+1e-9)
	return bottom, bottom + (hi-bottom)*1.25
}

// writePlots draws the figures, every run's events marked, and those of the scenario's score. It
// returns the file names.
func writePlots(rep *Report, out string) ([]string, error) {
	var files []string
	for _, f := range charts {
		var panels []*plot.Plot
		for k, pn := range f.panels {
			lo, hi := math.Inf(1), 0.0
			for _, r := range rep.Runs {
				for _, pt := range r.Series {
					if v, ok := pn.value(pt); ok {
						lo, hi = min(lo, v), max(hi, v)
					}
				}
			}
			p := benchutil.NewPlot(fmt.Sprintf("%s: %s", rep.Scenario, pn.title), "t (s)", pn.ylabel)
			p.X.Min, p.X.Max = 0, rep.Settings.DurationS
			p.Y.Min, p.Y.Max = yRange(lo, hi, pn.ratio)
			if pn.ratio {
				benchutil.RatioAxis(p)
			}
			for i, r := range rep.Runs {
				if err := benchutil.AddLine(p, runName(rep, r), benchutil.Palette[i%len(benchutil.Palette)], xys(r.Series, pn.value)); err != nil {
					return nil, err
				}
			}
			if err := markEvents(p, rep.Runs, k == 0, nil); err != nil {
				return nil, err
			}
			panels = append(panels, p)
		}
		if err := benchutil.SavePNG(filepath.Join(out, f.file), panels, heightOf(len(panels))); err != nil {
			return nil, err
		}
		files = append(files, f.file)
	}
	if len(rep.Runs) > 0 && rep.Runs[0].ReadHints != nil {
		more, err := plotReadHints(rep, out)
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	if len(rep.Runs) > 0 && rep.Runs[0].Move != nil {
		if err := plotMove(rep, out); err != nil {
			return nil, err
		}
		files = append(files, "snapshot.png")
	}
	return files, nil
}

// plotMove draws snapshot.png: the snapshot bytes the nodes sent per second against the configured
// rate, and the new replica's lag behind the leader in raft entries against the leader's log
// truncation threshold, every run overlaid.
func plotMove(rep *Report, out string) error {
	sent := benchutil.NewPlot(rep.Scenario+": snapshot bytes sent, all nodes", "t (s)", "MiB/s")
	lag := benchutil.NewPlot(rep.Scenario+": the new replica's lag behind the leader", "t (s)", "raft entries")
	var ref [2]float64
	for i, r := range rep.Runs {
		mv := r.Move
		if mv == nil {
			continue
		}
		var bs, ls plotter.XYs
		for _, p := range r.Series {
			var b, top, mine uint64
			for _, n := range p.Nodes {
				b, top = b+n.SnapshotBytes, max(top, n.RangeApplied)
				if n.Node == mv.To {
					mine = n.RangeApplied
				}
			}
			bs = append(bs, plotter.XY{X: p.T, Y: float64(b) / (1 << 20)})
			if mine > 0 {
				ls = append(ls, plotter.XY{X: p.T, Y: float64(top - mine)})
			}
		}
		c := benchutil.Palette[i%len(benchutil.Palette)]
		ref = [2]float64{float64(mv.RateBytesPerSec) / (1 << 20), float64(mv.LogTruncateThreshold)}
		if err := errors.Join(benchutil.AddLine(sent, runName(rep, r), c, bs), benchutil.AddLine(lag, runName(rep, r), c, ls)); err != nil {
			return err
		}
	}
	for k, p := range []*plot.Plot{sent, lag} {
		p.X.Min, p.X.Max = 0, rep.Settings.DurationS
		p.Y.Min, p.Y.Max = yRange(0, max(p.Y.Max, ref[k]), false) // the lines widened the axis to their data
		name := [2]string{"configured rate", "log truncation threshold"}[k]
		if err := errors.Join(benchutil.Dashed(p, name, benchutil.Grey, 0, ref[k], p.X.Max, ref[k]), markEvents(p, rep.Runs, k == 0, nil)); err != nil {
			return err
		}
	}
	return benchutil.SavePNG(filepath.Join(out, "snapshot.png"), []*plot.Plot{sent, lag}, stackedH)
}

func xys(series []Point, value func(Point) (float64, bool)) plotter.XYs {
	var out plotter.XYs
	for _, pt := range series {
		if v, ok := value(pt); ok {
			out = append(out, plotter.XY{X: pt.T, Y: v})
		}
	}
	return out
}

// markEvents marks each run's events as dashed lines in the run's colour, or in one when one is given
// (a task's end too) and, when label is set, names each kind of event once at its first start, with
// every run's task duration. The toggles' switches stay unmarked: there are dozens.
func markEvents(p *plot.Plot, runs []RunReport, label bool, one color.Color) error {
	type mark struct {
		t    float64
		durs []string
	}
	marks := map[string]*mark{}
	var order []string
	named := false
	for i, r := range runs {
		c, legend := one, "events (dashed)"
		if c == nil {
			c, legend = benchutil.Palette[i%len(benchutil.Palette)], "events (dashed, run's colour)"
		}
		for _, e := range r.Events {
			if e.Label == string(PolicyOn) || e.Label == string(PolicyOff) {
				continue
			}
			xs := []float64{e.T}
			if e.Task {
				xs = append(xs, e.EndT)
			}
			for _, x := range xs {
				name := ""
				if !named {
					name, named = legend, true
				}
				if err := benchutil.Dashed(p, name, c, x, p.Y.Min, x, p.Y.Max); err != nil {
					return err
				}
			}
			m := marks[e.Label]
			if m == nil {
				m = &mark{t: e.T}
				marks[e.Label] = m
				order = append(order, e.Label)
			}
			if e.Task {
				m.durs = append(m.durs, fmt.Sprintf("%.1fs", e.EndT-e.T))
			}
		}
	}
	// Labels take the first of three lines at the top whose last label ends before them (a label's
	// width estimated from its length).
	var ends [3]float64
	for k := range ends {
		ends[k] = math.Inf(-1)
	}
	for k := 0; label && k < len(order); k++ {
		m, text := marks[order[k]], " "+order[k]
		if len(m.durs) > 0 {
			text += " (" + strings.Join(m.durs, ", ") + ")"
		}
		line := 0
		for line < len(ends)-1 && ends[line] > m.t {
			line++
		}
		ends[line] = m.t + float64(len(text))*0.013*(p.X.Max-p.X.Min)
		if err := benchutil.Label(p, m.t, p.Y.Max-float64(line)*0.07*(p.Y.Max-p.Y.Min), text); err != nil {
			return err
		}
	}
	return nil
}

// plotReadHints draws node_hit_ratio.png, each node's block-cache hit ratio per second, a panel per
// run; and, when the runs change leaders, new_leader_hit_ratio.png: each run's new leader's hit ratio
// from 5 s before its change to 20 s after it, against the old leaders' mean before it (dashed).
func plotReadHints(rep *Report, out string) ([]string, error) {
	lo := 1.0
	for _, r := range rep.Runs {
		for _, p := range r.Series {
			for _, n := range p.Nodes {
				if v, ok := n.HitRatio(); ok {
					lo = min(lo, v)
				}
			}
		}
	}
	ymin, ymax := yRange(lo, 1, true) // one axis for every run: the differences that matter are a few points
	over := benchutil.NewPlot(fmt.Sprintf("%s: the new leader's block-cache hit ratio around the change", rep.Scenario), "t − change (s)", "hits / lookups")
	overLo := 1.0
	var panels []*plot.Plot
	var old []float64
	for k, r := range rep.Runs {
		h := r.ReadHints
		p := benchutil.NewPlot(fmt.Sprintf("%s: block-cache hit ratio per node — %s", rep.Scenario, runName(rep, r)), "t (s)", "hits / lookups")
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, rep.Settings.DurationS, ymin, ymax
		benchutil.RatioAxis(p)
		byNode := map[uint64]plotter.XYs{}
		var ids []uint64
		var around plotter.XYs
		for _, pt := range r.Series {
			for _, n := range pt.Nodes {
				v, ok := n.HitRatio()
				if !ok || n.Node == 0 {
					continue
				}
				if _, seen := byNode[n.Node]; !seen {
					ids = append(ids, n.Node)
				}
				byNode[n.Node] = append(byNode[n.Node], plotter.XY{X: pt.T, Y: v})
				if t := pt.T - 1 - h.ChangeT; n.Node == h.NewLeader && h.Change != "" && t >= -5 && t <= 20 {
					around, overLo = append(around, plotter.XY{X: t, Y: v}), min(overLo, v)
				}
			}
		}
		slices.Sort(ids)
		for j, id := range ids {
			name := fmt.Sprintf("n%d", id)
			if id == h.OldLeader {
				name += " (leader before)"
			} else if id == h.NewLeader {
				name += " (leader after)"
			}
			if err := benchutil.AddLine(p, name, benchutil.Palette[j%len(benchutil.Palette)], byNode[id]); err != nil {
				return nil, err
			}
		}
		if err := markEvents(p, []RunReport{{Events: r.Events}}, true, benchutil.Red); err != nil {
			return nil, err
		}
		panels = append(panels, p)
		if err := benchutil.AddLine(over, runName(rep, r), benchutil.Palette[k%len(benchutil.Palette)], around); err != nil {
			return nil, err
		}
		if h.OldLeaderHitRatio != nil {
			old, overLo = append(old, *h.OldLeaderHitRatio), min(overLo, *h.OldLeaderHitRatio)
		}
	}
	files := []string{"node_hit_ratio.png"}
	if err := benchutil.SavePNG(filepath.Join(out, files[0]), panels, heightOf(len(panels))); err != nil || len(old) == 0 {
		return files, err
	}
	over.X.Min, over.X.Max, over.Y.Min = -5, 20, max(0, math.Floor((overLo-0.02)*20)/20)
	over.Y.Max = 1
	m, _ := benchutil.MeanSD(old)
	if err := benchutil.Dashed(over, "old leaders' mean before", color.Black, -5, m, 20, m); err != nil {
		return nil, err
	}
	if err := benchutil.Dashed(over, "the change", benchutil.Red, 0, over.Y.Min, 0, 1); err != nil {
		return nil, err
	}
	return append(files, "new_leader_hit_ratio.png"), benchutil.SavePNG(filepath.Join(out, "new_leader_hit_ratio.png"), []*plot.Plot{over}, panelH)
}
