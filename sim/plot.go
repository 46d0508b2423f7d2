package sim

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// palette colours the runs: policy on, policy off.
var palette = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}

// plots writes throughput.png and latency.png (p99) of every run, overlaid, with the events marked,
// and returns their names.
func (res *Result) plots(dir string) ([]string, error) {
	charts := []struct {
		file, title, ylabel string
		value               func(Point) float64
	}{
		{"throughput.png", "throughput", "ops/s", func(p Point) float64 { return float64(p.Ops) }},
		{"latency.png", "p99 latency (M/M/1 per node)", "ms", func(p Point) float64 { return p.P99Ms }},
	}
	var files []string
	for _, ch := range charts {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %s (simulated)", res.Report.Scenario, ch.title)
		p.X.Label.Text, p.Y.Label.Text = "s", ch.ylabel
		for i, run := range res.Report.Runs {
			pts := make(plotter.XYs, 0, len(run.Series))
			for _, pt := range run.Series {
				pts = append(pts, plotter.XY{X: pt.T, Y: ch.value(pt)})
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return nil, fmt.Errorf("sim: plot %s: %w", ch.file, err)
			}
			line.Color = palette[i%len(palette)]
			p.Add(line)
			name := "policy " + map[bool]string{true: "on", false: "off"}[run.PolicyOn]
			if res.Report.Policy == "" {
				name = "run"
			}
			p.Legend.Add(name, line)
		}
		if len(res.Report.Runs) > 0 {
			for _, e := range res.Report.Runs[0].Events {
				mark, err := plotter.NewLine(plotter.XYs{{X: e.T, Y: p.Y.Min}, {X: e.T, Y: p.Y.Max}})
				if err != nil {
					return nil, fmt.Errorf("sim: plot %s: %w", ch.file, err)
				}
				mark.Color, mark.Dashes = color.Gray{Y: 0x80}, []vg.Length{vg.Points(3), vg.Points(3)}
				p.Add(mark)
			}
		}
		p.Legend.Top = true
		if err := p.Save(8*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, ch.file)); err != nil {
			return nil, fmt.Errorf("sim: plot %s: %w", ch.file, err)
		}
		files = append(files, ch.file)
	}
	return files, nil
}
