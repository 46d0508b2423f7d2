package scenario

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// metric is one timeline: one or more lines drawn from a run's series.
type metric struct {
	file   string
	title  string
	ylabel string
	lines  []line
	fixedY float64 // when > 0, the Y axis is [0, fixedY]
}

type line struct {
	name  string
	color color.Color
	value func(Point) (float64, bool)
}

var (
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	red    = color.RGBA{R: 200, G: 30, B: 30, A: 255}
)

var metrics = []metric{
	{file: "throughput.png", title: "throughput", ylabel: "ops/s", lines: []line{
		{"ops/s", blue, func(p Point) (float64, bool) { return float64(p.Ops), true }},
	}},
	{file: "latency.png", title: "latency", ylabel: "ms", lines: []line{
		{"p50", blue, func(p Point) (float64, bool) { return p.P50Ms, true }},
		{"p99", orange, func(p Point) (float64, bool) { return p.P99Ms, true }},
	}},
	{file: "hit_ratio.png", title: "block-cache hit ratio", ylabel: "hits / accesses", fixedY: 1, lines: []line{
		{"hit ratio", blue, func(p Point) (float64, bool) {
			if p.HitRatio == nil {
				return 0, false
			}
			return *p.HitRatio, true
		}},
	}},
}

// writePlots draws one PNG per metric, the runs side by side on a shared Y axis, events marked
// as red vertical lines. It returns the file names.
func writePlots(rep *Report, out string) ([]string, error) {
	var files []string
	for _, m := range metrics {
		ymax := m.fixedY
		if ymax == 0 {
			for _, r := range rep.Runs {
				for _, p := range r.Series {
					for _, l := range m.lines {
						if v, ok := l.value(p); ok && v > ymax {
							ymax = v
						}
					}
				}
			}
			if ymax == 0 {
				ymax = 1
			}
			ymax *= 1.1
		}
		var row []*plot.Plot
		for _, r := range rep.Runs {
			p, err := panel(rep, r, m, ymax)
			if err != nil {
				return nil, err
			}
			row = append(row, p)
		}
		w, h := 7*vg.Inch*vg.Length(max(len(row), 2)), 4*vg.Inch
		img := vgimg.New(w, h)
		dc := draw.New(img)
		tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Points(12), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
		canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
		for j, p := range row {
			p.Draw(canvases[0][j])
		}
		f, err := os.Create(filepath.Join(out, m.file))
		if err != nil {
			return nil, err
		}
		if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		files = append(files, m.file)
	}
	return files, nil
}

func panel(rep *Report, r RunReport, m metric, ymax float64) (*plot.Plot, error) {
	p := plot.New()
	state := "off"
	if r.PolicyOn {
		state = "on"
	}
	p.Title.Text = fmt.Sprintf("%s: %s — %s %s", rep.Scenario, m.title, rep.Policy, state)
	if r.Variant != "" {
		p.Title.Text = fmt.Sprintf("%s: %s — %s", rep.Scenario, m.title, r.Variant)
	}
	p.X.Label.Text = "t (s)"
	p.Y.Label.Text = m.ylabel
	p.X.Min, p.X.Max = 0, rep.Settings.DurationS
	p.Y.Min, p.Y.Max = 0, ymax
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for _, l := range m.lines {
		var xys plotter.XYs
		for _, pt := range r.Series {
			if v, ok := l.value(pt); ok {
				xys = append(xys, plotter.XY{X: pt.T, Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		ln, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		ln.Color = l.color
		ln.Width = vg.Points(1.5)
		p.Add(ln)
		p.Legend.Add(l.name, ln)
	}
	for _, e := range r.Events {
		marks := []float64{e.T}
		if e.Task {
			marks = append(marks, e.EndT) // the task's window: from its request to its end
		}
		for _, x := range marks {
			v, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: ymax}})
			if err != nil {
				return nil, err
			}
			v.Color = red
			v.Width = vg.Points(1)
			v.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(v)
		}
		label := e.Label
		if label == "" {
			label = e.What
		}
		if len(label) > 32 { // a long label would squeeze the plot area
			label = label[:31] + "…"
		}
		if e.Task {
			label = fmt.Sprintf("%s (%.1fs)", label, e.EndT-e.T)
		}
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: e.T, Y: ymax * 0.97}}, Labels: []string{" " + label}})
		if err != nil {
			return nil, err
		}
		p.Add(lb)
	}
	return p, nil
}
