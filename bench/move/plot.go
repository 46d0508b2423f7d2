package move

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	green  = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	red    = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	grey   = color.RGBA{R: 120, G: 120, B: 120, A: 255}
)

// logTruncateThreshold is the replica store's default LogTruncateThreshold: a leader keeps between
// half of it and all of it of its applied log; a follower further behind needs a new snapshot.
const logTruncateThreshold = 4096

type series struct {
	name  string
	color color.Color
	value func(Point) float64
}

// writePlot draws timeline.png: throughput, latency and snapshot send rate per second, stacked, with
// the move's start and end marked.
func writePlot(rep *Report, out string) (string, error) {
	const file = "timeline.png"
	rate := float64(rep.Settings.ConfiguredRateBytesSec) / (1 << 20)
	panels := []struct {
		title, ylabel string
		lines         []series
		ref           float64 // a dashed horizontal reference line when > 0
		snap          bool    // mark the snapshots the new node applied
	}{
		{"foreground throughput (95% reads, 5% updates)", "ops/s", []series{
			{"ops/s", blue, func(p Point) float64 { return p.OpsPerSec }}}, 0, false},
		{"foreground latency", "ms", []series{
			{"p50", blue, func(p Point) float64 { return p.P50Ms }},
			{"p99", orange, func(p Point) float64 { return p.P99Ms }}}, 0, false},
		{"snapshot bytes sent (dashed: configured rate)", "MiB/s", []series{
			{"snapshot MiB/s", green, func(p Point) float64 { return p.SnapshotBytesS / (1 << 20) }}}, rate, true},
		{"new replica's lag behind the leader (dashed: the leader's log truncation threshold)", "raft entries", []series{
			{"lag", red, func(p Point) float64 {
				if p.NewReplicaApplied == 0 || p.LeaderApplied < p.NewReplicaApplied {
					return 0
				}
				return float64(p.LeaderApplied - p.NewReplicaApplied)
			}}}, logTruncateThreshold, true},
	}
	xmax := 1.0
	if n := len(rep.Series); n > 0 {
		xmax = rep.Series[n-1].T
	}
	var rows [][]*plot.Plot
	for _, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "t (s)"
		p.Y.Label.Text = pn.ylabel
		p.X.Min, p.X.Max = 0, xmax
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		ymax := pn.ref
		for _, s := range pn.lines {
			var xys plotter.XYs
			for _, pt := range rep.Series {
				v := s.value(pt)
				xys = append(xys, plotter.XY{X: pt.T, Y: v})
				ymax = max(ymax, v)
			}
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return "", err
			}
			l.Color, l.Width = s.color, vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(s.name, l)
		}
		if ymax == 0 {
			ymax = 1
		}
		ymax *= 1.1
		p.Y.Min, p.Y.Max = 0, ymax
		if pn.ref > 0 {
			l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: pn.ref}, {X: xmax, Y: pn.ref}})
			if err != nil {
				return "", err
			}
			l.Color, l.Width, l.Dashes = grey, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
		}
		marks := []struct {
			t    float64
			text string
		}{{rep.Move.StartS, " move start"}}
		if rep.Move.EndS > 0 {
			marks = append(marks, struct {
				t    float64
				text string
			}{rep.Move.EndS, " move end"})
		}
		for _, m := range marks {
			l, err := plotter.NewLine(plotter.XYs{{X: m.t, Y: 0}, {X: m.t, Y: ymax}})
			if err != nil {
				return "", err
			}
			l.Color, l.Width, l.Dashes = red, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
			lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: m.t, Y: ymax * 0.8}}, Labels: []string{m.text}})
			if err != nil {
				return "", err
			}
			p.Add(lb)
		}
		if pn.snap { // mark each snapshot the new node applied
			for _, e := range rep.Move.Events {
				if !strings.Contains(e.What, fmt.Sprintf("n%d: snapshot applied", rep.Move.ToNode)) {
					continue
				}
				l, err := plotter.NewLine(plotter.XYs{{X: e.T, Y: 0}, {X: e.T, Y: ymax}})
				if err != nil {
					return "", err
				}
				l.Color, l.Width, l.Dashes = green, vg.Points(1), []vg.Length{vg.Points(1), vg.Points(3)}
				p.Add(l)
			}
			p.Title.Text += "; dotted: snapshot applied by the new node"
		}
		rows = append(rows, []*plot.Plot{p})
	}
	const w, h = 10 * vg.Inch, 13 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Points(6), PadY: vg.Points(12), PadTop: vg.Points(6),
		PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	canvases := plot.Align(rows, tiles, dc)
	for i, r := range rows {
		r[0].Draw(canvases[i][0])
	}
	f, err := os.Create(filepath.Join(out, file))
	if err != nil {
		return "", err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return "", err
	}
	return file, f.Close()
}
