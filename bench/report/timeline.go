package report

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Timeline is one run as the figures show it: its name in legends, its seconds and the events to
// mark on them.
type Timeline struct {
	Name   string
	Series []Point
	Events []EventMark
}

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
	PanelH   = 4.5 * vg.Inch
	StackedH = 2.4 * vg.Inch
)

// HeightOf is the height of each of n panels stacked in one figure.
func HeightOf(n int) vg.Length {
	if n == 1 {
		return PanelH
	}
	return StackedH
}

// YRange is the axis for values from lo to hi: from 0 (a ratio: just below lo) to hi with room
// above it for three lines of the events' labels.
func YRange(lo, hi float64, ratio bool) (float64, float64) {
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

// WriteTimelines draws throughput.png, latency.png (p99 and p50) and hit_ratio.png into out, every
// run overlaid with its events marked, and returns the files it wrote; a figure with no data in
// any run (the simulator has no block cache) is left out.
func WriteTimelines(out, title string, durationS float64, runs []Timeline) ([]string, error) {
	var files []string
	for _, f := range charts {
		var panels []*plot.Plot
		seen := false
		for k, pn := range f.panels {
			lo, hi := math.Inf(1), 0.0
			for _, r := range runs {
				for _, pt := range r.Series {
					if v, ok := pn.value(pt); ok {
						lo, hi, seen = min(lo, v), max(hi, v), true
					}
				}
			}
			p := NewPlot(fmt.Sprintf("%s: %s", title, pn.title), "t (s)", pn.ylabel)
			p.X.Min, p.X.Max = 0, durationS
			p.Y.Min, p.Y.Max = YRange(lo, hi, pn.ratio)
			if pn.ratio {
				RatioAxis(p)
			}
			events := make([][]EventMark, len(runs))
			for i, r := range runs {
				if err := AddLine(p, r.Name, Palette[i%len(Palette)], XYs(r.Series, pn.value)); err != nil {
					return nil, err
				}
				events[i] = r.Events
			}
			if err := MarkEvents(p, events, k == 0, nil); err != nil {
				return nil, err
			}
			panels = append(panels, p)
		}
		if !seen {
			continue
		}
		if err := SavePNG(filepath.Join(out, f.file), panels, HeightOf(len(panels))); err != nil {
			return nil, err
		}
		files = append(files, f.file)
	}
	return files, nil
}

// XYs are the points of series that value has a value for.
func XYs(series []Point, value func(Point) (float64, bool)) plotter.XYs {
	var out plotter.XYs
	for _, pt := range series {
		if v, ok := value(pt); ok {
			out = append(out, plotter.XY{X: pt.T, Y: v})
		}
	}
	return out
}

// MarkEvents marks each run's events as dashed lines in the run's colour, or in one when one is
// given (a task's end too) and, when label is set, names each kind of event once at its first
// start, with every run's task duration.
func MarkEvents(p *plot.Plot, runs [][]EventMark, label bool, one color.Color) error {
	type mark struct {
		t    float64
		durs []string
	}
	marks := map[string]*mark{}
	var order []string
	named := false
	for i, events := range runs {
		c, legend := one, "events (dashed)"
		if c == nil {
			c, legend = Palette[i%len(Palette)], "events (dashed, run's colour)"
		}
		for _, e := range events {
			xs := []float64{e.T}
			if e.Task {
				xs = append(xs, e.EndT)
			}
			for _, x := range xs {
				name := ""
				if !named {
					name, named = legend, true
				}
				if err := Dashed(p, name, c, x, p.Y.Min, x, p.Y.Max); err != nil {
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
		if err := Label(p, m.t, p.Y.Max-float64(line)*0.07*(p.Y.Max-p.Y.Min), text); err != nil {
			return err
		}
	}
	return nil
}
