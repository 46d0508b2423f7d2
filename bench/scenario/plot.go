package scenario

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/shoaldb/shoal/bench/benchutil"
)

// timeline is one PNG: one or more lines drawn from each run's series, the runs side by side.
type timeline struct {
	file, title, ylabel string
	fixedY              float64 // when > 0, the Y axis is [0, fixedY]
	lines               []line
}

type line struct {
	name  string
	color color.Color
	value func(Point) (float64, bool)
}

var timelines = []timeline{
	{file: "throughput.png", title: "throughput", ylabel: "ops/s", lines: []line{
		{"ops/s", benchutil.Blue, func(p Point) (float64, bool) { return float64(p.Ops), true }}}},
	{file: "latency.png", title: "latency", ylabel: "ms", lines: []line{
		{"p50", benchutil.Blue, func(p Point) (float64, bool) { return p.P50Ms, true }},
		{"p99", benchutil.Orange, func(p Point) (float64, bool) { return p.P99Ms, true }}}},
	{file: "hit_ratio.png", title: "block-cache hit ratio", ylabel: "hits / accesses", fixedY: 1, lines: []line{
		{"hit ratio", benchutil.Blue, func(p Point) (float64, bool) {
			if p.HitRatio == nil {
				return 0, false
			}
			return *p.HitRatio, true
		}}}},
}

// runTitle names a run in a panel's title.
func runTitle(rep *Report, r RunReport, what string) string {
	if r.Variant != "" {
		return fmt.Sprintf("%s: %s — %s", rep.Scenario, what, r.Variant)
	}
	return fmt.Sprintf("%s: %s — %s %s", rep.Scenario, what, rep.Policy, onOff(r.PolicyOn))
}

// writePlots draws the timelines, events marked as red dashed lines (a task's end too), and for a
// read-hints scenario the nodes' hit ratios. It returns the file names.
func writePlots(rep *Report, out string) ([]string, error) {
	var files []string
	for _, m := range timelines {
		ymax := m.fixedY
		for _, r := range rep.Runs {
			for _, p := range r.Series {
				for _, l := range m.lines {
					if v, ok := l.value(p); ok && m.fixedY == 0 {
						ymax = max(ymax, v*1.1)
					}
				}
			}
		}
		var row []*plot.Plot
		for _, r := range rep.Runs {
			p := benchutil.NewPlot(runTitle(rep, r, m.title), "t (s)", m.ylabel)
			p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, rep.Settings.DurationS, 0, max(ymax, 1e-9)
			for _, l := range m.lines {
				var xys plotter.XYs
				for _, pt := range r.Series {
					if v, ok := l.value(pt); ok {
						xys = append(xys, plotter.XY{X: pt.T, Y: v})
					}
				}
				if err := benchutil.AddLine(p, l.name, l.color, xys); err != nil {
					return nil, err
				}
			}
			if err := markEvents(p, r.Events, ymax); err != nil {
				return nil, err
			}
			row = append(row, p)
		}
		if err := benchutil.SavePNG(filepath.Join(out, m.file), [][]*plot.Plot{row}, 7*vg.Inch, 4*vg.Inch); err != nil {
			return nil, err
		}
		files = append(files, m.file)
	}
	if len(rep.Runs) > 0 && rep.Runs[0].ReadHints != nil {
		more, err := plotReadHints(rep, out)
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return files, nil
}

// markEvents marks the events (the toggles' switches stay unlabelled: there are dozens).
func markEvents(p *plot.Plot, events []EventMark, ymax float64) error {
	for _, e := range events {
		if e.Label == string(PolicyOn) || e.Label == string(PolicyOff) {
			continue
		}
		marks := []float64{e.T}
		label := " " + e.Label
		if e.Task {
			marks = append(marks, e.EndT)
			label = fmt.Sprintf(" %s (%.1fs)", e.Label, e.EndT-e.T)
		}
		for _, x := range marks {
			if err := benchutil.Dashed(p, benchutil.Red, x, 0, x, ymax); err != nil {
				return err
			}
		}
		if err := benchutil.Label(p, e.T, ymax*0.97, label); err != nil {
			return err
		}
	}
	return nil
}

// plotReadHints draws node_hit_ratio.png, each node's block-cache hit ratio per second, one panel per
// run; and, when the runs change leaders, new_leader_hit_ratio.png: each run's new leader's hit ratio
// from 5 s before its change to 20 s after it, against the old leaders' mean before it (dashed).
func plotReadHints(rep *Report, out string) ([]string, error) {
	ymin := 1.0
	for _, r := range rep.Runs {
		for _, p := range r.Series {
			for _, n := range p.Nodes {
				if v, ok := n.HitRatio(); ok {
					ymin = min(ymin, v)
				}
			}
		}
	}
	ymin = max(0, math.Floor((ymin-0.02)*20)/20) // a shared axis: the differences that matter are a few points
	var row []*plot.Plot
	over := benchutil.NewPlot(fmt.Sprintf("%s: the new leader's block-cache hit ratio around the change", rep.Scenario), "t − change (s)", "hits / lookups")
	over.X.Min, over.X.Max, over.Y.Min, over.Y.Max = -5, 20, ymin, 1
	over.Legend.Top = false
	var old []float64
	for k, r := range rep.Runs {
		h := r.ReadHints
		p := benchutil.NewPlot(runTitle(rep, r, "block-cache hit ratio per node"), "t (s)", "hits / lookups (≥ 100 a second)")
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, rep.Settings.DurationS, ymin, 1
		p.Legend.Top = false // the events' labels are at the top
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
					around = append(around, plotter.XY{X: t, Y: v})
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
		if err := markEvents(p, r.Events, 1); err != nil {
			return nil, err
		}
		row = append(row, p)
		if err := benchutil.AddLine(over, runLabel(r), benchutil.Palette[k%len(benchutil.Palette)], around); err != nil {
			return nil, err
		}
		if h.OldLeaderHitRatio != nil {
			old = append(old, *h.OldLeaderHitRatio)
		}
	}
	files := []string{"node_hit_ratio.png"}
	if err := benchutil.SavePNG(filepath.Join(out, files[0]), [][]*plot.Plot{row}, 7*vg.Inch, 4*vg.Inch); err != nil || len(old) == 0 {
		return files, err
	}
	m, _ := meanSD(old)
	if err := benchutil.Dashed(over, color.Black, -5, m, 20, m); err != nil {
		return nil, err
	}
	if err := benchutil.Dashed(over, benchutil.Red, 0, ymin, 0, 1); err != nil {
		return nil, err
	}
	return append(files, "new_leader_hit_ratio.png"), benchutil.SavePNG(filepath.Join(out, "new_leader_hit_ratio.png"),
		[][]*plot.Plot{{over}}, 8*vg.Inch, 4.5*vg.Inch)
}
