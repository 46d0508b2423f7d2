package scenario

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"

	"github.com/shoaldb/shoal/bench/report"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

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

// writePlots draws the timelines of every run, the toggles' switches unmarked (there are dozens),
// and the figures of the scenario's score. It returns the file names.
func writePlots(rep *Report, out string) ([]string, error) {
	runs := make([]report.Timeline, len(rep.Runs))
	for i, r := range rep.Runs {
		runs[i] = report.Timeline{Name: runName(rep, r), Series: r.Series, Events: marked(r.Events)}
	}
	files, err := report.WriteTimelines(out, rep.Scenario, rep.Settings.DurationS, runs)
	if err != nil {
		return nil, err
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

// marked are the events a figure marks: all but the toggles' switches.
func marked(events []EventMark) []EventMark {
	var out []EventMark
	for _, e := range events {
		if e.Label != string(PolicyOn) && e.Label != string(PolicyOff) {
			out = append(out, e)
		}
	}
	return out
}

// allMarked are the marked events of every run.
func allMarked(runs []RunReport) [][]EventMark {
	out := make([][]EventMark, len(runs))
	for i, r := range runs {
		out[i] = marked(r.Events)
	}
	return out
}

// plotMove draws snapshot.png: the snapshot bytes the nodes sent per second against the configured
// rate, and the new replica's lag behind the leader in raft entries against the leader's log
// truncation threshold, every run overlaid.
func plotMove(rep *Report, out string) error {
	sent := report.NewPlot(rep.Scenario+": snapshot bytes sent, all nodes", "t (s)", "MiB/s")
	lag := report.NewPlot(rep.Scenario+": the new replica's lag behind the leader", "t (s)", "raft entries")
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
		c := report.Palette[i%len(report.Palette)]
		ref = [2]float64{float64(mv.RateBytesPerSec) / (1 << 20), float64(mv.LogTruncateThreshold)}
		if err := errors.Join(report.AddLine(sent, runName(rep, r), c, bs), report.AddLine(lag, runName(rep, r), c, ls)); err != nil {
			return err
		}
	}
	for k, p := range []*plot.Plot{sent, lag} {
		p.X.Min, p.X.Max = 0, rep.Settings.DurationS
		p.Y.Min, p.Y.Max = report.YRange(0, max(p.Y.Max, ref[k]), false) // the lines widened the axis to their data
		name := [2]string{"configured rate", "log truncation threshold"}[k]
		if err := errors.Join(report.Dashed(p, name, report.Grey, 0, ref[k], p.X.Max, ref[k]), report.MarkEvents(p, allMarked(rep.Runs), k == 0, nil)); err != nil {
			return err
		}
	}
	return report.SavePNG(filepath.Join(out, "snapshot.png"), []*plot.Plot{sent, lag}, report.StackedH)
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
	ymin, ymax := report.YRange(lo, 1, true) // one axis for every run: the differences that matter are a few points
	over := report.NewPlot(fmt.Sprintf("%s: the new leader's block-cache hit ratio around the change", rep.Scenario), "t − change (s)", "hits / lookups")
	overLo := 1.0
	var panels []*plot.Plot
	var old []float64
	for k, r := range rep.Runs {
		h := r.ReadHints
		p := report.NewPlot(fmt.Sprintf("%s: block-cache hit ratio per node — %s", rep.Scenario, runName(rep, r)), "t (s)", "hits / lookups")
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, rep.Settings.DurationS, ymin, ymax
		report.RatioAxis(p)
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
			if err := report.AddLine(p, name, report.Palette[j%len(report.Palette)], byNode[id]); err != nil {
				return nil, err
			}
		}
		if err := report.MarkEvents(p, [][]EventMark{marked(r.Events)}, true, report.Red); err != nil {
			return nil, err
		}
		panels = append(panels, p)
		if err := report.AddLine(over, runName(rep, r), report.Palette[k%len(report.Palette)], around); err != nil {
			return nil, err
		}
		if h.OldLeaderHitRatio != nil {
			old, overLo = append(old, *h.OldLeaderHitRatio), min(overLo, *h.OldLeaderHitRatio)
		}
	}
	files := []string{"node_hit_ratio.png"}
	if err := report.SavePNG(filepath.Join(out, files[0]), panels, report.HeightOf(len(panels))); err != nil || len(old) == 0 {
		return files, err
	}
	over.X.Min, over.X.Max, over.Y.Min = -5, 20, max(0, math.Floor((overLo-0.02)*20)/20)
	over.Y.Max = 1
	m, _ := report.MeanSD(old)
	if err := report.Dashed(over, "old leaders' mean before", color.Black, -5, m, 20, m); err != nil {
		return nil, err
	}
	if err := report.Dashed(over, "the change", report.Red, 0, over.Y.Min, 0, 1); err != nil {
		return nil, err
	}
	return append(files, "new_leader_hit_ratio.png"), report.SavePNG(filepath.Join(out, "new_leader_hit_ratio.png"), []*plot.Plot{over}, report.PanelH)
}
